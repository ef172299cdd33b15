import { createHmac } from 'node:crypto';
import { apiBase, requireField, textSetting } from '../account-fields.js';
import {
  AccountConfigError,
  PlatformError,
  UnsupportedOperationError,
  type AccountContext,
  type AdapterIo,
  type ChannelAdapter,
  type OutboundPayload,
  type SendResult,
} from '../adapter.js';
import { callPlatform, retryAfterMs, type PlatformResponse } from '../http.js';
import { asRecord } from '../json-body.js';

/**
 * Feishu/Lark custom bot ("自定义机器人"): a webhook bound to one group chat. It can only post
 * there, so `chatId` is ignored: every message goes to the group the hook was created in. It
 * receives nothing, and since it has no app credentials it cannot upload images or files either.
 */

const DEFAULT_API_BASE = 'https://open.feishu.cn/open-apis';

/** Custom-bot rate limit (100/min and 5/s per bot, tighter around the hour and half hour). */
const FREQUENCY_LIMITED = 11232;
/**
 * Lark answers `9499` both for "too many request" and for "Bad Request" (a body it cannot parse),
 * so only the former, told apart by its message, is worth retrying.
 */
const OVERLOADED = 9499;
const OVERLOAD_MESSAGE = /too many|frequen|rate limit/i;

/**
 * The whole request body may be at most 20 KB. One UTF-16 unit costs at most 6 bytes in the JSON
 * body (a control character as `\u00XX`; CJK is 3), so 3,000 units always fit with room for
 * the envelope and signature fields.
 */
const TEXT_LIMIT = 3000;

function hookToken(ctx: AccountContext): string {
  const token = requireField(ctx.secrets.app_secret?.trim(), 'chat_a_webhook accounts need app_secret (the webhook token)');
  // A pasted hook URL would otherwise be sent as a path segment and fail with a puzzling 404.
  if (/[/?#]/.test(token)) {
    throw new AccountConfigError('chat_a_webhook app_secret must be the webhook token (the last path segment of the hook URL), not the URL');
  }
  return token;
}

/** `sign` = base64(HMAC-SHA256 keyed with "timestamp\nsecret" over an empty message), as Lark documents it. */
function sign(timestampSeconds: string, secret: string): string {
  return createHmac('sha256', `${timestampSeconds}\n${secret}`).update('').digest('base64');
}

/**
 * Lark's answer: `{code, msg, data}`, or `{StatusCode, StatusMessage}` from older hooks; errors
 * come in 200 bodies too. The message never carries the URL: the token is in its path.
 */
function checkAnswer(what: string, res: PlatformResponse, io: AdapterIo): void {
  const body = asRecord(res.json);
  const rawCode = body?.code ?? body?.StatusCode;
  const code = typeof rawCode === 'number' ? rawCode : undefined;
  const ok2xx = res.status >= 200 && res.status < 300;
  if (ok2xx && code === 0) return;
  const rawMsg = body?.msg ?? body?.StatusMessage;
  const msg = typeof rawMsg === 'string' && rawMsg ? rawMsg : undefined;
  const rateLimited = code === FREQUENCY_LIMITED || (code === OVERLOADED && msg !== undefined && OVERLOAD_MESSAGE.test(msg));
  const retryable = res.status === 429 || res.status >= 500 || rateLimited;
  let description = msg ?? (code === undefined ? (ok2xx ? 'answer without a status code' : 'no error description') : 'error');
  if (code !== undefined) description += ` (code ${code})`;
  const after = retryAfterMs(res.headers, io.now());
  throw new PlatformError(`${what}: ${ok2xx ? '' : `HTTP ${res.status}: `}${description}`, {
    status: res.status,
    retryable,
    ...(after === undefined ? {} : { retryAfterMs: after }),
  });
}

async function send(ctx: AccountContext, io: AdapterIo, _chatId: string, payload: OutboundPayload): Promise<SendResult> {
  if (payload.kind !== 'text') {
    throw new UnsupportedOperationError(
      `chat_a_webhook accounts are webhook-only: they can send text, not ${payload.kind === 'image' ? 'images' : 'files'}`,
    );
  }
  const token = hookToken(ctx);
  const body: Record<string, unknown> = { msg_type: 'text', content: { text: payload.text } };
  const secret = ctx.secrets.secret;
  if (secret) {
    const timestamp = String(Math.floor(io.now() / 1000));
    body.timestamp = timestamp;
    body.sign = sign(timestamp, secret);
  }
  const what = 'chat_a_webhook send';
  const res = await callPlatform(io, what, `${apiBase(textSetting(ctx, 'api_base'), DEFAULT_API_BASE)}/bot/v2/hook/${encodeURIComponent(token)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify(body),
  });
  checkAnswer(what, res, io);
  // Hooks answer no message id.
  return { messageId: '' };
}

export const larkWebhook: ChannelAdapter = {
  platform: 'chat_a_webhook',
  fields: { settings: ['api_base'], secrets: ['app_secret', 'secret'] },
  textLimit: TEXT_LIMIT,
  supports: { image: false, file: false, inbound: false },
  send,
  parseInbound() {
    return Promise.reject(new UnsupportedOperationError('chat_a_webhook: webhook-only accounts receive no events'));
  },
};
