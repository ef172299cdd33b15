import { createHmac, randomBytes } from 'node:crypto';
import type http from 'node:http';
import { answerJson, parseJsonObject, retryAfterHeaders, startFakeServer } from './server.js';
import type { FakePlatform, FakeSentMessage } from './types.js';

/**
 * Fake Feishu/Lark custom bot webhook, from the public docs: `POST /open-apis/bot/v2/hook/<token>`
 * with `{msg_type, content}` (text: `content.text`) and, when the bot has signature checking on,
 * `timestamp` (seconds, at most an hour off) and `sign` = base64(HMAC-SHA256 keyed with
 * "timestamp\nsecret" over nothing). Answers `{code: 0, msg: 'success', data: {}}` (or the older
 * `{StatusCode: 0, StatusMessage: 'success'}`); failures are `{code, msg, data: {}}`, mostly in
 * HTTP 200 answers. It posts to its one group only and delivers no events.
 */

export interface FakeLarkWebhookOptions {
  /** The token in the hook URL's last path segment. */
  hookToken?: string;
  /** The signature secret; sends must then be signed. */
  secret?: string;
  /** Answer successes in the older `{StatusCode, StatusMessage}` shape. */
  legacyAnswer?: boolean;
  /** The group the hook posts to, recorded as each sent message's `chatId`. */
  groupChatId?: string;
}

const SIGN_FAIL = { code: 19021, msg: 'sign match fail or timestamp is not within one hour from current time', data: {} };
const HOOK_PREFIX = '/open-apis/bot/v2/hook/';

export async function startFakeLarkWebhook(opts: FakeLarkWebhookOptions = {}): Promise<FakePlatform> {
  const hookToken = opts.hookToken ?? `fake-hook-${randomBytes(6).toString('hex')}`;
  const secret = opts.secret;
  const groupChatId = opts.groupChatId ?? 'oc_fake_webhook_group';
  let serial = 0;

  function handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void {
    const isHook = url.pathname.startsWith(HOOK_PREFIX);
    const token = isHook ? decodeURIComponent(url.pathname.slice(HOOK_PREFIX.length)) : '';
    if (!isHook || req.method !== 'POST') return answerJson(res, 404, { code: 404, msg: 'page not found', data: {} });

    const failing = server.nextFailure();
    if (failing) return answerJson(res, failing.status, failing.body ?? defaultFailureBody(failing.status), retryAfterHeaders(failing));
    if (token !== hookToken) return answerJson(res, 200, { code: 19001, msg: 'param invalid: incoming webhook access token invalid', data: {} });
    if (raw.length > 20 * 1024) return answerJson(res, 200, { code: 9499, msg: 'Bad Request', data: {} });

    const body = parseJsonObject(raw);
    if (!body) return answerJson(res, 400, { code: 9499, msg: 'Bad Request', data: {} });

    if (secret !== undefined) {
      const timestamp = typeof body.timestamp === 'string' || typeof body.timestamp === 'number' ? String(body.timestamp) : '';
      const seconds = Number(timestamp);
      const expected = createHmac('sha256', `${timestamp}\n${secret}`).update('').digest('base64');
      if (!timestamp || !Number.isFinite(seconds) || Math.abs(Date.now() / 1000 - seconds) > 3600 || body.sign !== expected) {
        return answerJson(res, 200, SIGN_FAIL);
      }
    }

    const content = body.content;
    const text = typeof content === 'object' && content !== null ? (content as Record<string, unknown>).text : undefined;
    if (body.msg_type !== 'text' || typeof text !== 'string') {
      // This fake speaks text only (the real hook also takes post, image, share_chat and interactive).
      return answerJson(res, 200, { code: 9499, msg: 'Bad Request', data: {} });
    }
    fake.sent.push({ chatId: groupChatId, kind: 'text', text, messageId: `fake-hook-message-${++serial}` });
    return answerJson(res, 200, opts.legacyAnswer ? { Extra: null, StatusCode: 0, StatusMessage: 'success' } : { code: 0, msg: 'success', data: {} });
  }

  const server = await startFakeServer({
    handle,
    crashed: (res, message) => answerJson(res, 500, { code: 1, msg: `fake chat_a_webhook: ${message}`, data: {} }),
    mask: { path: (path) => (path.startsWith(HOOK_PREFIX) ? `${HOOK_PREFIX}<token>` : path) },
  });
  const url = `${server.origin}/open-apis`;

  const fake: FakePlatform = {
    url,
    account: { app_secret: hookToken, ...(secret !== undefined ? { secret } : {}), api_base: url },
    sent: [] as FakeSentMessage[],
    calls: server.calls,
    tokenFetches: 0,
    failNext: server.failNext,
    inbound() {
      throw new Error('chat_a_webhook has no inbound events: custom bots only post to their group');
    },
    close: server.close,
  };
  return fake;
}

function defaultFailureBody(status: number): { code: number; msg: string; data: Record<string, never> } {
  if (status === 429) return { code: 11232, msg: 'frequency limited', data: {} };
  if (status >= 500) return { code: 1, msg: 'Internal Server Error', data: {} };
  return { code: 9499, msg: 'Bad Request', data: {} };
}
