/**
 * DingTalk: the robot of an enterprise-internal app, driven through the robot APIs of
 * api.dingtalk.com (sends) and oapi.dingtalk.com (media upload), and fed by the robot's HTTP
 * callback (inbound).
 *
 * chatId: `user:<staffId>` is a one-to-one chat with that user (oToMessages/batchSend); anything
 * else is a group's openConversationId (groupMessages/send). Inbound events produce the same forms.
 *
 * Account: `app_id` = AppKey, `app_secret` = AppSecret, `robot_code` (default: the AppKey, which is
 * the robot code of an internal app's robot), `api_base`, `oapi_base`.
 */
import { createHmac } from 'node:crypto';
import { TokenRejectedError, withAccessToken } from '../access-token.js';
import { apiBase, requireField, textOrNumberSetting } from '../account-fields.js';
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
import { callPlatform, httpError, retryAfterMs, type PlatformResponse } from '../http.js';
import { asRecord, parseInboundJson } from '../json-body.js';
import { redact } from '../redact.js';

const DEFAULT_API_BASE = 'https://api.dingtalk.com';
const DEFAULT_OAPI_BASE = 'https://oapi.dingtalk.com';
/** DingTalk asks receivers to reject callbacks whose timestamp is more than an hour off. */
const CALLBACK_WINDOW_MS = 60 * 60_000;
/** Tokens live 7200 s; used when an answer omits expireIn. */
const DEFAULT_TOKEN_LIFETIME_S = 7200;
/** oapi errcodes that mean "too many calls" or "busy": the call may succeed later. */
const OAPI_RETRYABLE = new Set([-1, 90002, 90005, 90006, 90010, 90018]);
/** oapi errcodes for an invalid or expired access_token. */
const OAPI_BAD_TOKEN = new Set([40014, 42001]);

interface DingTalkAccount {
  appKey: string;
  appSecret: string;
  robotCode: string;
  apiBase: string;
  oapiBase: string;
  tokenKey: string;
}

function resolveAccount(account: AccountContext): DingTalkAccount {
  const appKey = requireField(textOrNumberSetting(account, 'app_id'), 'chat_b: the account needs app_id (the app\'s AppKey)');
  const appSecret = requireField(account.secrets['app_secret'], 'chat_b: the account needs app_secret (the app\'s AppSecret)');
  const apiBaseSetting = textOrNumberSetting(account, 'api_base');
  return {
    appKey,
    appSecret,
    robotCode: textOrNumberSetting(account, 'robot_code') ?? appKey,
    apiBase: apiBase(apiBaseSetting, DEFAULT_API_BASE),
    // An account pointed at one host (a fake, a proxy) with api_base alone sends the oapi calls
    // there too, so one server can stand in for both DingTalk hosts.
    oapiBase: apiBase(textOrNumberSetting(account, 'oapi_base') ?? apiBaseSetting, DEFAULT_OAPI_BASE),
    // The AppKey is part of the key so that re-pointing an account at another app never reuses
    // the old app's token.
    tokenKey: `chat_b:${account.accountId}:${appKey}`,
  };
}

/**
 * The error for an api.dingtalk.com answer. Failures there are non-2xx with `{code, message,
 * requestid}`. Rate limits come as 429 `Throttling.*` or as 403 `Forbidden.AccessDenied.QpsLimit*`;
 * an invalid token as 401 `InvalidAuthentication`.
 */
function apiError(what: string, res: PlatformResponse, io: AdapterIo, secrets: readonly string[]): PlatformError {
  const body = asRecord(res.json);
  const code = typeof body?.['code'] === 'string' ? body['code'] : undefined;
  const message = typeof body?.['message'] === 'string' ? body['message'] : undefined;
  const detail = redact([message, code && `(${code})`].filter(Boolean).join(' '), secrets) || undefined;
  if (res.status === 401 || code === 'InvalidAuthentication') {
    return new TokenRejectedError(`${what}: HTTP ${res.status}: ${detail ?? 'access token rejected'}`, { status: res.status, retryable: false });
  }
  if (code !== undefined && (/^Throttling/i.test(code) || /QpsLimit/i.test(code))) {
    const after = retryAfterMs(res.headers, io.now());
    const msg = `${what}: HTTP ${res.status}: ${detail ?? code}`;
    return new PlatformError(msg, after === undefined ? { status: res.status, retryable: true } : { status: res.status, retryable: true, retryAfterMs: after });
  }
  return httpError(what, res, io, detail);
}

/** The error for an oapi.dingtalk.com answer: `{errcode, errmsg}`, usually in a 200. */
function oapiError(what: string, res: PlatformResponse, io: AdapterIo, secrets: readonly string[]): PlatformError | undefined {
  if (res.status < 200 || res.status >= 300) {
    const body = asRecord(res.json);
    const errmsg = typeof body?.['errmsg'] === 'string' ? redact(body['errmsg'], secrets) : undefined;
    return httpError(what, res, io, errmsg);
  }
  const body = asRecord(res.json);
  if (!body) return new PlatformError(`${what}: answer is not JSON`, { status: res.status, retryable: false });
  const errcode = typeof body['errcode'] === 'number' ? body['errcode'] : 0;
  if (errcode === 0) return undefined;
  const errmsg = typeof body['errmsg'] === 'string' ? redact(body['errmsg'], secrets) : 'error';
  const message = `${what}: ${errmsg} (errcode ${errcode})`;
  if (OAPI_BAD_TOKEN.has(errcode)) return new TokenRejectedError(message, { status: res.status, retryable: false });
  return new PlatformError(message, { status: res.status, retryable: OAPI_RETRYABLE.has(errcode) });
}

async function fetchToken(io: AdapterIo, acc: DingTalkAccount): Promise<{ token: string; expiresInMs: number }> {
  const what = 'chat_b access token';
  const res = await callPlatform(io, what, `${acc.apiBase}/v1.0/oauth2/accessToken`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ appKey: acc.appKey, appSecret: acc.appSecret }),
  });
  if (res.status < 200 || res.status >= 300) {
    const err = apiError(what, res, io, [acc.appSecret]);
    // A 401 here is about the app's credentials, not a token to refresh.
    throw err instanceof TokenRejectedError ? new PlatformError(err.message, { status: err.status, retryable: false }) : err;
  }
  const body = asRecord(res.json);
  const token = body?.['accessToken'];
  if (typeof token !== 'string' || !token) throw new PlatformError(`${what}: answer without accessToken`, { status: res.status, retryable: false });
  const expireIn = typeof body?.['expireIn'] === 'number' && body['expireIn'] > 0 ? body['expireIn'] : DEFAULT_TOKEN_LIFETIME_S;
  return { token, expiresInMs: expireIn * 1000 };
}

function withToken<T>(io: AdapterIo, acc: DingTalkAccount, call: (token: string) => Promise<T>): Promise<T> {
  return withAccessToken(io.tokens, acc.tokenKey, () => fetchToken(io, acc), call);
}

/** Uploads bytes to the oapi media store and answers the media_id. */
async function uploadMedia(io: AdapterIo, acc: DingTalkAccount, type: 'image' | 'file', media: Extract<MediaSource, { data: Uint8Array }>): Promise<string> {
  const what = `chat_b ${type} upload`;
  return withToken(io, acc, async (token) => {
    const form = new FormData();
    form.append('media', new Blob([new Uint8Array(media.data)], { type: media.mimeType ?? 'application/octet-stream' }), media.fileName);
    const url = `${acc.oapiBase}/media/upload?access_token=${encodeURIComponent(token)}&type=${type}`;
    const res = await callPlatform(io, what, url, { method: 'POST', body: form });
    const err = oapiError(what, res, io, [acc.appSecret, token]);
    if (err) throw err;
    const mediaId = asRecord(res.json)?.['media_id'];
    if (typeof mediaId !== 'string' || !mediaId) throw new PlatformError(`${what}: answer without media_id`, { status: res.status, retryable: false });
    return mediaId;
  });
}

function extension(fileName: string): string {
  const dot = fileName.lastIndexOf('.');
  return dot > 0 && dot < fileName.length - 1 ? fileName.slice(dot + 1).toLowerCase() : '';
}

async function message(io: AdapterIo, acc: DingTalkAccount, payload: OutboundPayload): Promise<{ msgKey: string; msgParam: Record<string, string> }> {
  switch (payload.kind) {
    case 'text':
      return { msgKey: 'sampleText', msgParam: { content: payload.text } };
    case 'image': {
      // photoURL takes a public URL or a media_id from media/upload.
      const photoURL = 'key' in payload.image ? payload.image.key : await uploadMedia(io, acc, 'image', payload.image);
      return { msgKey: 'sampleImageMsg', msgParam: { photoURL } };
    }
    case 'file': {
      const file = payload.file;
      const mediaId = 'key' in file ? file.key : await uploadMedia(io, acc, 'file', file);
      const fileName = file.fileName ?? 'file';
      return { msgKey: 'sampleFile', msgParam: { mediaId, fileName, fileType: extension(fileName) } };
    }
  }
}

async function send(account: AccountContext, io: AdapterIo, chatId: string, payload: OutboundPayload): Promise<SendResult> {
  const acc = resolveAccount(account);
  const { msgKey, msgParam } = await message(io, acc, payload);
  const userId = chatId.startsWith('user:') ? chatId.slice('user:'.length) : undefined;
  const what = userId === undefined ? 'chat_b group send' : 'chat_b direct send';
  const path = userId === undefined ? '/v1.0/robot/groupMessages/send' : '/v1.0/robot/oToMessages/batchSend';
  const target = userId === undefined ? { openConversationId: chatId } : { userIds: [userId] };
  const body = JSON.stringify({ robotCode: acc.robotCode, ...target, msgKey, msgParam: JSON.stringify(msgParam) });
  return withToken(io, acc, async (token) => {
    const res = await callPlatform(io, what, `${acc.apiBase}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-acs-dingtalk-access-token': token },
      body,
    });
    if (res.status < 200 || res.status >= 300) throw apiError(what, res, io, [acc.appSecret, token]);
    const answer = asRecord(res.json);
    const key = answer?.['processQueryKey'];
    if (typeof key !== 'string' || !key) throw new PlatformError(`${what}: answer without processQueryKey`, { status: res.status, retryable: false });
    // batchSend answers 200 while naming users it could not reach or throttled.
    const invalid = answer?.['invalidStaffIdList'];
    if (Array.isArray(invalid) && invalid.length > 0) throw new PlatformError(`${what}: DingTalk does not know this user`, { status: res.status, retryable: false });
    const throttled = answer?.['flowControlledStaffIdList'];
    if (Array.isArray(throttled) && throttled.length > 0) throw new PlatformError(`${what}: rate limited for this user`, { status: res.status, retryable: true });
    return { messageId: key };
  });
}

function header(request: InboundRequest, name: string): string | undefined {
  const value = request.headers[name];
  return value ? value.trim() : undefined;
}

/** Checks the callback's `timestamp` and `sign` headers (HMAC-SHA256 of "timestamp\nAppSecret" keyed by the AppSecret). */
function verifyCallback(request: InboundRequest, appSecret: string, now: number): void {
  const timestamp = header(request, 'timestamp');
  const sign = header(request, 'sign');
  if (!timestamp || !sign) throw new InboundAuthError('chat_b: callback without timestamp/sign headers');
  const ts = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || !Number.isSafeInteger(ts)) throw new InboundAuthError('chat_b: callback timestamp is not a number');
  if (Math.abs(now - ts) > CALLBACK_WINDOW_MS) throw new InboundAuthError('chat_b: callback timestamp is more than an hour off');
  const expected = createHmac('sha256', appSecret).update(`${timestamp}\n${appSecret}`).digest();
  const given = Buffer.from(sign, 'base64');
  if (!constantTimeEqual(given, expected)) throw new InboundAuthError('chat_b: callback signature does not match');
}

async function parseInbound(account: AccountContext, io: AdapterIo, request: InboundRequest): Promise<InboundResult> {
  // Robot callbacks need only the AppSecret; without it nothing can be verified.
  const appSecret = account.secrets['app_secret'];
  if (!appSecret) throw new InboundAuthError('chat_b: the account has no app_secret to verify callbacks with');
  verifyCallback(request, appSecret, io.now());
  // The sign covers the timestamp only, not the body: one use each, or a captured pair carries any body for an hour.
  return { ...parseEvent(request.rawBody), singleUse: header(request, 'sign')! };
}

function parseEvent(rawBody: Buffer): InboundResult {
  const body = asRecord(parseInboundJson(rawBody, 'chat_b: callback body is not JSON'));
  const msgtype = body?.['msgtype'];
  if (!body || typeof msgtype !== 'string') throw new InboundParseError('chat_b: callback body has no msgtype');
  if (msgtype !== 'text') return { kind: 'ignored', reason: `msgtype ${msgtype}` };
  const str = (name: string): string | undefined => {
    const v = body[name];
    return typeof v === 'string' && v ? v : typeof v === 'number' ? String(v) : undefined;
  };
  const content = asRecord(body['text'])?.['content'];
  const msgId = str('msgId');
  const conversationType = str('conversationType');
  const conversationId = str('conversationId');
  // senderStaffId is the userid that batchSend takes; it is absent for users outside the app's
  // organisation, whose opaque senderId is the only id there is (a DM to it will be refused).
  const sender = str('senderStaffId') ?? str('senderId');
  if (typeof content !== 'string' || !msgId || !sender || (conversationType !== '1' && conversationType !== '2')) {
    throw new InboundParseError('chat_b: text callback lacks text.content, msgId, sender or conversationType');
  }
  if (conversationType === '2' && !conversationId) throw new InboundParseError('chat_b: group callback without conversationId');
  const dm = conversationType === '1';
  return {
    kind: 'message',
    message: {
      eventId: msgId,
      chatId: dm ? `user:${sender}` : (conversationId as string),
      chatType: dm ? 'dm' : 'group',
      senderId: sender,
      text: content.trim(),
    },
  };
}

export const dingtalk: ChannelAdapter = {
  platform: 'chat_b',
  fields: { settings: ['app_id', 'robot_code', 'api_base', 'oapi_base'], secrets: ['app_secret'] },
  // DingTalk documents no character cap for sampleText. 5000 UTF-16 units keep one message
  // readable on a phone, and even all-CJK (about 15 KB of UTF-8) well inside the request sizes
  // its robot APIs accept.
  textLimit: 5000,
  supports: { image: true, file: true, inbound: true },
  send,
  parseInbound,
};
