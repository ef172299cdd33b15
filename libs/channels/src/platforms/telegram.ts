import { apiBase, requireField } from '../account-fields.js';
import {
  AccountConfigError,
  InboundAuthError,
  InboundParseError,
  PlatformError,
  type AccountContext,
  type AdapterIo,
  type ChannelAdapter,
  type InboundRequest,
  type InboundResult,
  type MediaSource,
  type SendResult,
} from '../adapter.js';
import { constantTimeEqual } from '../constant-time.js';
import { callPlatform, retryAfterMs, type PlatformResponse } from '../http.js';
import { asRecord, parseInboundJson } from '../json-body.js';
import { maskSecrets } from '../redact.js';

/**
 * Telegram Bot API. The bot token is the whole credential and travels in the URL path
 * (`/bot<token>/<method>`), so nothing here ever puts a URL, or a platform answer that might echo
 * one, into an error. There is no token exchange: `io.tokens` is unused.
 */

const DEFAULT_API_BASE = 'https://api.telegram.org';

// Bot tokens are `<bot id>:<secret>` in this alphabet; anything else would change the URL's path.
const TOKEN_SHAPE = /^[A-Za-z0-9:_-]+$/;

export const telegram: ChannelAdapter = {
  platform: 'chat_d',
  fields: { settings: ['api_base'], secrets: ['app_secret', 'secret'] },
  textLimit: 4096,
  supports: { image: true, file: true, inbound: true },

  async send(account, io, chatId, payload) {
    const bot = botEndpoint(account);
    switch (payload.kind) {
      case 'text':
        return call(io, bot, 'sendMessage', jsonBody({ chat_id: chatId, text: payload.text }));
      case 'image':
        return call(io, bot, 'sendPhoto', mediaBody(chatId, 'photo', payload.image));
      case 'file':
        return call(io, bot, 'sendDocument', mediaBody(chatId, 'document', payload.file));
    }
  },

  // async so that a rejected request is a rejected promise, never a synchronous throw.
  async parseInbound(account, _io, request) {
    return parseUpdate(account, request);
  },
};

interface BotEndpoint {
  base: string;
  token: string;
}

function botEndpoint(account: AccountContext): BotEndpoint {
  const token = requireField(account.secrets.app_secret, 'chat_d: the account has no bot token (app_secret)');
  if (!TOKEN_SHAPE.test(token)) throw new AccountConfigError('chat_d: app_secret is not a Telegram bot token');
  return { base: apiBase(account.settings.api_base, DEFAULT_API_BASE), token };
}

function jsonBody(body: Record<string, string>): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** A new upload goes as multipart (the only way Telegram takes bytes); a key is a file_id Telegram already holds. */
function mediaBody(chatId: string, field: 'photo' | 'document', source: MediaSource): RequestInit {
  if ('key' in source) return jsonBody({ chat_id: chatId, [field]: source.key });
  const form = new FormData();
  form.append('chat_id', chatId);
  // Copied so the Blob owns plain ArrayBuffer-backed bytes whatever view the caller passed.
  const blob = new Blob([new Uint8Array(source.data)], { type: source.mimeType ?? 'application/octet-stream' });
  form.append(field, blob, source.fileName);
  // fetch sets the multipart content type with its boundary.
  return { method: 'POST', body: form };
}

async function call(io: AdapterIo, bot: BotEndpoint, method: string, init: RequestInit): Promise<SendResult> {
  const what = `chat_d ${method}`;
  const res = await callPlatform(io, what, `${bot.base}/bot${bot.token}/${method}`, init);
  const body = asRecord(res.json);
  if (res.status < 200 || res.status >= 300 || body?.ok !== true) throw telegramError(what, res, body, bot.token, io);
  const messageId = asRecord(body.result)?.message_id;
  if (typeof messageId !== 'number' && typeof messageId !== 'string') {
    throw new PlatformError(`${what}: the answer carries no message_id`, { status: res.status, retryable: false });
  }
  return { messageId: String(messageId) };
}

/**
 * Telegram answers `{ok:false, error_code, description, parameters?}`; `error_code` mirrors the
 * HTTP status. Flood control says how long to wait in `parameters.retry_after` (seconds), which is
 * preferred over the header because it is what the Bot API documents.
 */
function telegramError(
  what: string,
  res: PlatformResponse,
  body: Record<string, unknown> | undefined,
  token: string,
  io: AdapterIo,
): PlatformError {
  const errorCode = body?.error_code;
  const status = res.status >= 200 && res.status < 300 && typeof errorCode === 'number' ? errorCode : res.status;
  const retryable = status === 429 || status >= 500;
  const params = asRecord(body?.parameters);
  const retryAfter = params?.retry_after;
  const after = typeof retryAfter === 'number' && retryAfter >= 0 ? retryAfter * 1000 : retryAfterMs(res.headers, io.now());
  let detail = typeof body?.description === 'string' ? body.description : 'no description';
  const migrated = params?.migrate_to_chat_id;
  if (typeof migrated === 'number' || typeof migrated === 'string') detail += ` (the chat is now ${migrated})`;
  // Descriptions are Telegram's own text, but a token must never reach a log even if one were echoed.
  detail = maskSecrets(detail, [token], '<token>');
  const message = `${what}: HTTP ${status}: ${detail}`;
  return new PlatformError(message, after === undefined ? { status, retryable } : { status, retryable, retryAfterMs: after });
}

function parseUpdate(account: AccountContext, request: InboundRequest): InboundResult {
  // Telegram signs nothing: the secret_token given to setWebhook comes back in this header.
  const expected = account.secrets.secret;
  if (!expected) throw new InboundAuthError('chat_d: the account has no webhook secret (secret) to check requests against');
  const given = request.headers['x-telegram-bot-api-secret-token'];
  if (!given || !constantTimeEqual(given, expected)) throw new InboundAuthError('chat_d: missing or wrong secret token');

  const u = asRecord(parseInboundJson(request.rawBody, 'chat_d: the body is not JSON'));
  if (!u || typeof u.update_id !== 'number') throw new InboundParseError('chat_d: the body is not a Telegram update');

  // Edits, channel posts, callbacks and the like arrive under other keys than `message`.
  const message = asRecord(u.message);
  if (!message) {
    const kind = Object.keys(u).find((k) => k !== 'update_id') ?? 'empty';
    return { kind: 'ignored', reason: `update kind ${kind}` };
  }
  const chat = asRecord(message.chat);
  const chatId = chat?.id;
  const messageId = message.message_id;
  if (typeof messageId !== 'number' || (typeof chatId !== 'number' && typeof chatId !== 'string')) {
    throw new InboundParseError('chat_d: the message lacks message_id or chat.id');
  }
  const from = asRecord(message.from);
  if (!from || (typeof from.id !== 'number' && typeof from.id !== 'string')) return { kind: 'ignored', reason: 'message without a sender' };
  // Includes anonymous group admins and posts on behalf of a channel (Telegram's own bot users).
  if (from.is_bot === true) return { kind: 'ignored', reason: 'message from a bot' };
  if (typeof message.text !== 'string' || !message.text) return { kind: 'ignored', reason: 'message without text' };

  return {
    kind: 'message',
    message: {
      // message_id is only unique within its chat.
      eventId: `${chatId}:${messageId}`,
      chatId: String(chatId),
      chatType: chat?.type === 'private' ? 'dm' : 'group',
      senderId: String(from.id),
      text: message.text,
    },
  };
}
