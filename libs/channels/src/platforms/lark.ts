import { createDecipheriv, createHash } from 'node:crypto';
import { TokenRejectedError, withAccessToken } from '../access-token.js';
import { apiBase, requireField, textSetting } from '../account-fields.js';
import {
  InboundAuthError,
  InboundParseError,
  PlatformError,
  type AccountContext,
  type AdapterIo,
  type ChannelAdapter,
  type InboundRequest,
  type InboundResult,
  type MediaSource,
  type OutboundPayload,
  type SendResult,
} from '../adapter.js';
import { constantTimeEqual } from '../constant-time.js';
import { callPlatform, retryAfterMs, type PlatformResponse } from '../http.js';
import { asRecord, parseInboundJson, requireString } from '../json-body.js';
import { maskSecrets } from '../redact.js';

/**
 * Feishu/Lark Open Platform app bot ("custom app" with the bot capability). Sends through the
 * IM v1 API with a tenant_access_token; receives event subscription v2.0 pushes
 * (`im.message.receive_v1`), plain or encrypted with the app's Encrypt Key.
 */

const DEFAULT_API_BASE = 'https://open.feishu.cn/open-apis';

/** Lark answers a rate-limited call with this code (HTTP 429, or 400 on older APIs). */
const RATE_LIMIT_CODE = 99991400;
/** Missing / invalid / invalid-app tenant token: a fresh token may fix the call. */
const TOKEN_REJECTED_CODES = new Set([99991661, 99991663, 99991664]);

/**
 * A text message's request body may be ~150 KB. The text is JSON-encoded twice (the `content`
 * field is itself a JSON string), so one UTF-16 unit costs at most ~7 bytes (a control character
 * as `\\u00XX`) and usually 1-3: 10,000 units stay far below the cap while rarely forcing a split.
 */
const TEXT_LIMIT = 10_000;

interface LarkAccount {
  appId: string;
  appSecret: string;
  apiBase: string;
  tokenKey: string;
}

function larkAccount(ctx: AccountContext): LarkAccount {
  const appId = requireField(textSetting(ctx, 'app_id'), 'chat_a accounts need app_id');
  const appSecret = requireField(ctx.secrets.app_secret, 'chat_a accounts need app_secret');
  // app_id in the key: an account edited to another app must not reuse the old app's token.
  return { appId, appSecret, apiBase: apiBase(textSetting(ctx, 'api_base'), DEFAULT_API_BASE), tokenKey: `chat_a:${ctx.accountId}:${appId}` };
}

/**
 * The PlatformError for a failed Lark answer. Lark reports failures as `{code, msg}`, in 200
 * bodies as well as 4xx/5xx ones; rate limits say how long to wait in `x-ogw-ratelimit-reset`
 * (seconds) rather than Retry-After. `scrub` lists secrets to keep out of the message in case
 * Lark's `msg` ever echoes a request field.
 */
function larkError(what: string, res: PlatformResponse, io: AdapterIo, scrub: string[] = [], ErrorType = PlatformError): PlatformError {
  const body = asRecord(res.json);
  const code = typeof body?.code === 'number' ? body.code : undefined;
  const msg = typeof body?.msg === 'string' && body.msg ? body.msg : undefined;
  const rateLimited = res.status === 429 || code === RATE_LIMIT_CODE;
  const retryable = rateLimited || res.status >= 500;
  let description = msg ?? (code === undefined ? 'no error description' : 'error');
  if (code !== undefined) description += ` (code ${code})`;
  description = maskSecrets(description, scrub, '***');
  const httpPart = res.status >= 200 && res.status < 300 ? '' : `HTTP ${res.status}: `;
  const after = retryAfterMs(res.headers, io.now()) ?? rateLimitResetMs(res.headers);
  return new ErrorType(`${what}: ${httpPart}${description}`, {
    status: res.status,
    retryable,
    ...(after === undefined ? {} : { retryAfterMs: after }),
  });
}

function rateLimitResetMs(headers: Headers): number | undefined {
  const value = headers.get('x-ogw-ratelimit-reset');
  if (!value) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.round(seconds * 1000) : undefined;
}

/**
 * The `data` of a successful answer (`code: 0`), else the matching PlatformError: a
 * TokenRejectedError when the tenant token was refused, so that withAccessToken tries a fresh one.
 */
function okData(what: string, res: PlatformResponse, io: AdapterIo): Record<string, unknown> {
  const body = asRecord(res.json);
  if (res.status >= 200 && res.status < 300 && body?.code === 0) return asRecord(body.data) ?? {};
  throw larkError(what, res, io, [], tokenRejected(res) ? TokenRejectedError : PlatformError);
}

async function fetchTenantToken(io: AdapterIo, acct: LarkAccount): Promise<{ token: string; expiresInMs: number }> {
  const what = 'chat_a tenant_access_token';
  const res = await callPlatform(io, what, `${acct.apiBase}/auth/v3/tenant_access_token/internal`, {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify({ app_id: acct.appId, app_secret: acct.appSecret }),
  });
  const body = asRecord(res.json);
  const token = body?.tenant_access_token;
  if (res.status >= 200 && res.status < 300 && body?.code === 0 && typeof token === 'string' && token) {
    // Lark documents `expire` in seconds (2 hours today); assume that if it is ever missing.
    const expire = typeof body.expire === 'number' && body.expire > 0 ? body.expire : 7200;
    return { token, expiresInMs: expire * 1000 };
  }
  throw larkError(what, res, io, [acct.appSecret]);
}

function tokenRejected(res: PlatformResponse): boolean {
  const code = asRecord(res.json)?.code;
  return res.status === 401 || (typeof code === 'number' && TOKEN_REJECTED_CODES.has(code));
}

/** Runs one call with the account's tenant token (a fresh one if Lark rejects it) and answers its `data`. */
function withTenantToken(
  io: AdapterIo,
  acct: LarkAccount,
  what: string,
  call: (token: string) => Promise<PlatformResponse>,
): Promise<Record<string, unknown>> {
  return withAccessToken(io.tokens, acct.tokenKey, () => fetchTenantToken(io, acct), async (token) => okData(what, await call(token), io));
}

async function upload(
  io: AdapterIo,
  acct: LarkAccount,
  kind: 'image' | 'file',
  media: Extract<MediaSource, { data: Uint8Array }>,
): Promise<string> {
  const what = `chat_a upload ${kind}`;
  const data = await withTenantToken(io, acct, what, (token) => {
    const form = new FormData();
    const blob = new Blob([media.data], media.mimeType ? { type: media.mimeType } : {});
    if (kind === 'image') {
      form.append('image_type', 'message');
      form.append('image', blob, media.fileName);
    } else {
      // `stream` is Lark's type for any file; the typed ones (pdf, doc, mp4, opus, ...) only change
      // how the client previews it, and opus/mp4 need extra fields (duration).
      form.append('file_type', 'stream');
      form.append('file_name', media.fileName);
      form.append('file', blob, media.fileName);
    }
    return callPlatform(io, what, `${acct.apiBase}/im/v1/${kind === 'image' ? 'images' : 'files'}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
  });
  return requireString(kind === 'image' ? data.image_key : data.file_key, what, `${kind}_key`);
}

async function send(ctx: AccountContext, io: AdapterIo, chatId: string, payload: OutboundPayload): Promise<SendResult> {
  const acct = larkAccount(ctx);
  let msgType: 'text' | 'image' | 'file';
  let content: Record<string, string>;
  switch (payload.kind) {
    case 'text':
      msgType = 'text';
      content = { text: payload.text };
      break;
    case 'image':
      msgType = 'image';
      content = { image_key: 'key' in payload.image ? payload.image.key : await upload(io, acct, 'image', payload.image) };
      break;
    case 'file':
      msgType = 'file';
      content = { file_key: 'key' in payload.file ? payload.file.key : await upload(io, acct, 'file', payload.file) };
      break;
  }
  const what = 'chat_a send';
  const data = await withTenantToken(io, acct, what, (token) =>
    callPlatform(io, what, `${acct.apiBase}/im/v1/messages?receive_id_type=chat_id`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ receive_id: chatId, msg_type: msgType, content: JSON.stringify(content) }),
    }),
  );
  return { messageId: typeof data.message_id === 'string' ? data.message_id : '' };
}

// ---- inbound ----

/**
 * How far a signed event's `x-lark-request-timestamp` may be from now: a captured event is
 * refused after this (within it, the message id drops a repeat).
 */
const SIGNED_WINDOW_MS = 5 * 60_000;

/**
 * Checks `x-lark-signature` (hex SHA-256 of timestamp + nonce + encrypt_key + raw body) and that
 * its timestamp (Unix seconds) is within SIGNED_WINDOW_MS of `now`. Returns false when the
 * request carries no signature; throws when it carries a wrong or stale one.
 */
function checkSignature(request: InboundRequest, encryptKey: string, now: number): boolean {
  const signature = request.headers['x-lark-signature'];
  if (!signature) return false;
  const timestamp = request.headers['x-lark-request-timestamp'] ?? '';
  const nonce = request.headers['x-lark-request-nonce'] ?? '';
  const expected = createHash('sha256')
    .update(Buffer.from(`${timestamp}${nonce}${encryptKey}`, 'utf8'))
    .update(request.rawBody)
    .digest('hex');
  if (!constantTimeEqual(signature.toLowerCase(), expected)) throw new InboundAuthError('chat_a: x-lark-signature does not match');
  const seconds = Number(timestamp);
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(now - seconds * 1000) > SIGNED_WINDOW_MS) {
    throw new InboundAuthError('chat_a: x-lark-request-timestamp is missing or more than 5 minutes off');
  }
  return true;
}

/** AES-256-CBC, key = SHA-256(encrypt_key), the IV prepended to the ciphertext, PKCS#7 padding. */
function decrypt(encrypted: string, encryptKey: string): Record<string, unknown> {
  // A body that does not decrypt to JSON was sealed with another key (or forged): an auth failure.
  const fail = () => new InboundAuthError('chat_a: the event does not decrypt with the account encrypt_key');
  const data = Buffer.from(encrypted, 'base64');
  if (data.length < 32 || data.length % 16 !== 0) throw fail();
  let plain: string;
  try {
    const key = createHash('sha256').update(encryptKey, 'utf8').digest();
    const decipher = createDecipheriv('aes-256-cbc', key, data.subarray(0, 16));
    plain = Buffer.concat([decipher.update(data.subarray(16)), decipher.final()]).toString('utf8');
  } catch {
    throw fail();
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(plain);
  } catch {
    throw fail();
  }
  const record = asRecord(parsed);
  if (!record) throw fail();
  return record;
}

function parseJsonObject(raw: Buffer): Record<string, unknown> {
  const record = asRecord(parseInboundJson(raw, 'chat_a: the body is not JSON'));
  if (!record) throw new InboundParseError('chat_a: the body is not a JSON object');
  return record;
}

type EventShape =
  | { kind: 'challenge'; token: unknown; challenge: unknown }
  | { kind: 'v2'; token: unknown; header: Record<string, unknown>; event: unknown }
  | { kind: 'v1'; token: unknown };

function eventShape(body: Record<string, unknown>): EventShape {
  if (body.type === 'url_verification') return { kind: 'challenge', token: body.token, challenge: body.challenge };
  const header = asRecord(body.header);
  if (body.schema === '2.0' && header) return { kind: 'v2', token: header.token, header, event: body.event };
  if (body.type === 'event_callback') return { kind: 'v1', token: body.token };
  throw new InboundParseError('chat_a: the body is not a Lark event');
}

async function parseInbound(ctx: AccountContext, io: AdapterIo, request: InboundRequest): Promise<InboundResult> {
  const verificationToken = ctx.secrets.token || undefined;
  const encryptKey = ctx.secrets.encrypt_key || undefined;
  if (!verificationToken && !encryptKey) {
    throw new InboundAuthError('chat_a accounts need token (the verification token) or encrypt_key to receive events');
  }
  const outer = parseJsonObject(request.rawBody);
  const signed = encryptKey ? checkSignature(request, encryptKey, io.now()) : false;

  let body = outer;
  const encrypted = typeof outer.encrypt === 'string';
  if (encrypted) {
    if (!encryptKey) throw new InboundAuthError('chat_a: the event is encrypted but the account has no encrypt_key');
    body = decrypt(outer.encrypt as string, encryptKey);
  }
  const shape = eventShape(body);

  // Lark signs event pushes but documents the URL-verification request as outside signature
  // checks; that one arrives encrypted with the same key, which is the proof it came from Lark.
  if (encryptKey && !signed && !(shape.kind === 'challenge' && encrypted)) {
    throw new InboundAuthError('chat_a: the request carries no x-lark-signature');
  }
  if (verificationToken && !(typeof shape.token === 'string' && constantTimeEqual(shape.token, verificationToken))) {
    throw new InboundAuthError('chat_a: the verification token does not match');
  }

  switch (shape.kind) {
    case 'challenge':
      if (typeof shape.challenge !== 'string') throw new InboundParseError('chat_a: url_verification without a challenge');
      return { kind: 'challenge', contentType: 'application/json', body: JSON.stringify({ challenge: shape.challenge }) };
    case 'v1':
      return { kind: 'ignored', reason: 'event schema 1.0 (subscribe to 2.0 events)' };
    case 'v2':
      return messageEvent(shape.header, shape.event);
  }
}

/** Mention placeholders Lark puts in the text where users (or everyone) were @-mentioned. */
const MENTION_PLACEHOLDER = /@_(?:user_\d+|all)/g;

function messageEvent(header: Record<string, unknown>, eventValue: unknown): InboundResult {
  const eventType = header.event_type;
  if (eventType !== 'im.message.receive_v1') return { kind: 'ignored', reason: `event type ${String(eventType)}` };
  const event = asRecord(eventValue);
  const sender = asRecord(event?.sender);
  const message = asRecord(event?.message);
  if (!sender || !message) throw new InboundParseError('chat_a: im.message.receive_v1 without sender or message');
  // The bot's own messages (and other bots') would make agents answer each other.
  if (sender.sender_type === 'app') return { kind: 'ignored', reason: 'message from an app' };
  if (message.message_type !== 'text') return { kind: 'ignored', reason: `${String(message.message_type)} message` };

  const messageId = message.message_id;
  const chatId = message.chat_id;
  const senderId = asRecord(sender.sender_id)?.open_id;
  if (typeof messageId !== 'string' || !messageId || typeof chatId !== 'string' || !chatId) {
    throw new InboundParseError('chat_a: message without message_id or chat_id');
  }
  if (typeof senderId !== 'string' || !senderId) throw new InboundParseError('chat_a: message without sender open_id');
  let content: unknown;
  try {
    content = typeof message.content === 'string' ? JSON.parse(message.content) : undefined;
  } catch {
    content = undefined;
  }
  const rawText = asRecord(content)?.text;
  if (typeof rawText !== 'string') throw new InboundParseError('chat_a: text message without text content');
  const text = rawText.replace(MENTION_PLACEHOLDER, '').trim();
  if (!text) return { kind: 'ignored', reason: 'empty text (mentions only)' };
  return {
    kind: 'message',
    message: { eventId: messageId, chatId, chatType: message.chat_type === 'p2p' ? 'dm' : 'group', senderId, text },
  };
}

export const lark: ChannelAdapter = {
  platform: 'chat_a',
  fields: { settings: ['app_id', 'api_base'], secrets: ['app_secret', 'encrypt_key', 'token'] },
  textLimit: TEXT_LIMIT,
  supports: { image: true, file: true, inbound: true },
  send,
  parseInbound,
};
