/**
 * WeCom (WeChat Work): a self-built application, sending through qyapi.weixin.qq.com and fed by
 * the app's encrypted XML callback.
 *
 * chatId: `user:<userid>` is the app's chat with that member (message/send); anything else is a
 * group chat id created through appchat/create (appchat/send). Inbound messages to an app are
 * always one-to-one, so they always come in as `user:<userid>`.
 *
 * Account: `app_id` = corpid, `app_secret` = the app's corpsecret, `agent_id` = AgentId, `token`
 * and `encoding_aes_key` = the callback's Token and EncodingAESKey, `api_base`.
 */
import { createDecipheriv, createHash } from 'node:crypto';
import { TokenRejectedError, withAccessToken } from '../access-token.js';
import { apiBase, requireField, textOrNumberSetting } from '../account-fields.js';
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
  type OutboundPayload,
  type SendResult,
} from '../adapter.js';
import { constantTimeEqual } from '../constant-time.js';
import { callPlatform, httpError, type PlatformResponse } from '../http.js';
import { asRecord } from '../json-body.js';
import { redact } from '../redact.js';

const DEFAULT_API_BASE = 'https://qyapi.weixin.qq.com';
/** Tokens live 7200 s; used when an answer omits expires_in. */
const DEFAULT_TOKEN_LIFETIME_S = 7200;
/** -1 system busy, 45009 call frequency over the limit, 45033 too many concurrent calls. */
const RETRYABLE_ERRCODES = new Set([-1, 45009, 45033]);
/** 40014 invalid access_token, 42001 expired, 40001 invalid credential. */
const BAD_TOKEN_ERRCODES = new Set([40001, 40014, 42001]);

interface WeComAccount {
  corpId: string;
  corpSecret: string;
  apiBase: string;
  tokenKey: string;
}

function resolveAccount(account: AccountContext): WeComAccount {
  const corpId = requireCorpId(account);
  const corpSecret = requireField(account.secrets['app_secret'], 'chat_c: the account needs app_secret (the app\'s corpsecret)');
  return {
    corpId,
    corpSecret,
    apiBase: apiBase(textOrNumberSetting(account, 'api_base'), DEFAULT_API_BASE),
    // A token belongs to one (corpid, app) pair; the corpid in the key keeps a re-pointed account
    // from reusing another corp's token.
    tokenKey: `chat_c:${account.accountId}:${corpId}`,
  };
}

function requireCorpId(account: AccountContext): string {
  return requireField(textOrNumberSetting(account, 'app_id'), 'chat_c: the account needs app_id (the corpid)');
}

/** message/send takes the AgentId as a number. */
function agentIdOf(account: AccountContext): number {
  const raw = requireField(textOrNumberSetting(account, 'agent_id'), 'chat_c: the account needs agent_id (the app\'s AgentId) to message users');
  if (!/^\d+$/.test(raw)) throw new AccountConfigError('chat_c: agent_id must be the app\'s numeric AgentId');
  return Number(raw);
}

/**
 * The error in a WeCom answer, or undefined for success. WeCom reports failures as
 * `{errcode, errmsg}` in HTTP 200 bodies; a non-2xx status comes from its front ends.
 */
function checkAnswer(what: string, res: PlatformResponse, io: AdapterIo, secrets: readonly string[], tokenCall: boolean): PlatformError | undefined {
  const body = asRecord(res.json);
  const errcode = typeof body?.['errcode'] === 'number' ? body['errcode'] : undefined;
  const errmsg = typeof body?.['errmsg'] === 'string' ? redact(body['errmsg'], secrets) : undefined;
  if (res.status < 200 || res.status >= 300) {
    return httpError(what, res, io, errmsg === undefined ? undefined : `${errmsg} (errcode ${errcode ?? '?'})`);
  }
  if (!body) return new PlatformError(`${what}: answer is not JSON`, { status: res.status, retryable: false });
  if (errcode === undefined || errcode === 0) return undefined;
  const message = `${what}: ${errmsg ?? 'error'} (errcode ${errcode})`;
  if (!tokenCall && BAD_TOKEN_ERRCODES.has(errcode)) return new TokenRejectedError(message, { status: res.status, retryable: false });
  return new PlatformError(message, { status: res.status, retryable: RETRYABLE_ERRCODES.has(errcode) });
}

async function fetchToken(io: AdapterIo, acc: WeComAccount): Promise<{ token: string; expiresInMs: number }> {
  const what = 'chat_c access token';
  const url = `${acc.apiBase}/cgi-bin/gettoken?corpid=${encodeURIComponent(acc.corpId)}&corpsecret=${encodeURIComponent(acc.corpSecret)}`;
  const res = await callPlatform(io, what, url, { method: 'GET' });
  const err = checkAnswer(what, res, io, [acc.corpSecret], true);
  if (err) throw err;
  const body = asRecord(res.json);
  const token = body?.['access_token'];
  if (typeof token !== 'string' || !token) throw new PlatformError(`${what}: answer without access_token`, { status: res.status, retryable: false });
  const expiresIn = typeof body?.['expires_in'] === 'number' && body['expires_in'] > 0 ? body['expires_in'] : DEFAULT_TOKEN_LIFETIME_S;
  return { token, expiresInMs: expiresIn * 1000 };
}

/** POSTs to `path` with the token in the query (where WeCom wants it) and answers the checked JSON body. */
async function post(io: AdapterIo, acc: WeComAccount, what: string, path: string, query: string, body: RequestInit['body'], json: boolean): Promise<Record<string, unknown>> {
  return withAccessToken(io.tokens, acc.tokenKey, () => fetchToken(io, acc), async (token) => {
    const url = `${acc.apiBase}${path}?access_token=${encodeURIComponent(token)}${query}`;
    const res = await callPlatform(io, what, url, {
      method: 'POST',
      ...(json ? { headers: { 'content-type': 'application/json' } } : {}),
      body,
    });
    const err = checkAnswer(what, res, io, [acc.corpSecret, token], false);
    if (err) throw err;
    return asRecord(res.json) ?? {};
  });
}

async function uploadMedia(io: AdapterIo, acc: WeComAccount, type: 'image' | 'file', media: Extract<MediaSource, { data: Uint8Array }>): Promise<string> {
  const what = `chat_c ${type} upload`;
  // WeCom reads the part's filename (files are shown to the user under it) and content type.
  const form = new FormData();
  form.append('media', new Blob([new Uint8Array(media.data)], { type: media.mimeType ?? 'application/octet-stream' }), media.fileName);
  const answer = await post(io, acc, what, '/cgi-bin/media/upload', `&type=${type}`, form, false);
  const mediaId = answer['media_id'];
  if (typeof mediaId !== 'string' || !mediaId) throw new PlatformError(`${what}: answer without media_id`, { status: 200, retryable: false });
  return mediaId;
}

async function content(io: AdapterIo, acc: WeComAccount, payload: OutboundPayload): Promise<Record<string, unknown>> {
  switch (payload.kind) {
    case 'text':
      return { msgtype: 'text', text: { content: payload.text } };
    case 'image': {
      const mediaId = 'key' in payload.image ? payload.image.key : await uploadMedia(io, acc, 'image', payload.image);
      return { msgtype: 'image', image: { media_id: mediaId } };
    }
    case 'file': {
      const mediaId = 'key' in payload.file ? payload.file.key : await uploadMedia(io, acc, 'file', payload.file);
      return { msgtype: 'file', file: { media_id: mediaId } };
    }
  }
}

async function send(account: AccountContext, io: AdapterIo, chatId: string, payload: OutboundPayload): Promise<SendResult> {
  const acc = resolveAccount(account);
  const userId = chatId.startsWith('user:') ? chatId.slice('user:'.length) : undefined;
  // Checked before any upload so that a misconfigured account costs no platform calls.
  const agentid = userId === undefined ? undefined : agentIdOf(account);
  const message = await content(io, acc, payload);
  if (userId === undefined) {
    await post(io, acc, 'chat_c group send', '/cgi-bin/appchat/send', '', JSON.stringify({ chatid: chatId, ...message }), true);
    // appchat/send answers no message id.
    return { messageId: '' };
  }
  const what = 'chat_c send';
  const answer = await post(io, acc, what, '/cgi-bin/message/send', '', JSON.stringify({ touser: userId, agentid, ...message }), true);
  // A recipient WeCom cannot deliver to (unknown, outside the app's visible range, without a
  // licence) is listed in a success answer rather than failing it. The lists are lower-cased.
  for (const field of ['invaliduser', 'unlicenseduser']) {
    const listed = answer[field];
    if (typeof listed === 'string' && listed.toLowerCase().split('|').includes(userId.toLowerCase())) {
      throw new PlatformError(`${what}: WeCom could not deliver to this user (${field})`, { status: 200, retryable: false });
    }
  }
  const msgid = answer['msgid'];
  return { messageId: typeof msgid === 'string' ? msgid : '' };
}

// ---------------------------------------------------------------------------------------------
// Callbacks

/**
 * The top-level leaf elements of a small XML document (`<xml><A>..</A><B><![CDATA[..]]></B></xml>`)
 * by name, first occurrence winning; nested elements are skipped. WeCom's callback documents are
 * flat and attribute-free, so a full XML parser (and a dependency) buys nothing; what matters is
 * that CDATA is read as a unit, so a user's text containing `<MsgType>` or `</Content>` cannot pose
 * as a field. Answers undefined for anything malformed.
 */
export function parseFlatXml(xml: string): Map<string, string> | undefined {
  let i = 0;
  const skipSpace = (): void => {
    while (i < xml.length && /\s/.test(xml.charAt(i))) i++;
  };
  const openTag = /<([A-Za-z_][\w.-]*)\s*(\/?)>/y;
  const readOpen = (): { name: string; empty: boolean } | undefined => {
    openTag.lastIndex = i;
    const m = openTag.exec(xml);
    if (!m) return undefined;
    i = openTag.lastIndex;
    return { name: m[1] as string, empty: m[2] === '/' };
  };
  /** Reads up to and including `</name>`: the text, null for an element with children, undefined if malformed. */
  const readContent = (name: string, depth: number): string | null | undefined => {
    let text = '';
    let nested = false;
    for (;;) {
      if (i >= xml.length || depth > 16) return undefined;
      if (xml.startsWith('<![CDATA[', i)) {
        const end = xml.indexOf(']]>', i + 9);
        if (end < 0) return undefined;
        text += xml.slice(i + 9, end);
        i = end + 3;
      } else if (xml.startsWith('<!--', i)) {
        const end = xml.indexOf('-->', i + 4);
        if (end < 0) return undefined;
        i = end + 3;
      } else if (xml.startsWith('</', i)) {
        const close = `</${name}`;
        if (!xml.startsWith(close, i)) return undefined;
        i += close.length;
        skipSpace();
        if (xml.charAt(i) !== '>') return undefined;
        i++;
        return nested ? null : text;
      } else if (xml.charAt(i) === '<') {
        const child = readOpen();
        if (!child) return undefined;
        nested = true;
        if (!child.empty && readContent(child.name, depth + 1) === undefined) return undefined;
      } else {
        const end = xml.indexOf('<', i);
        if (end < 0) return undefined;
        const decoded = decodeEntities(xml.slice(i, end));
        if (decoded === undefined) return undefined;
        text += decoded;
        i = end;
      }
    }
  };

  skipSpace();
  if (xml.startsWith('<?xml', i)) {
    const end = xml.indexOf('?>', i);
    if (end < 0) return undefined;
    i = end + 2;
    skipSpace();
  }
  const root = readOpen();
  if (!root || root.empty) return undefined;
  const fields = new Map<string, string>();
  for (;;) {
    skipSpace();
    if (xml.startsWith('</', i)) {
      const close = `</${root.name}>`;
      if (!xml.startsWith(close, i)) return undefined;
      i += close.length;
      skipSpace();
      return i === xml.length ? fields : undefined;
    }
    const child = readOpen();
    if (!child) return undefined;
    const value = child.empty ? '' : readContent(child.name, 1);
    if (value === undefined) return undefined;
    if (value !== null && !fields.has(child.name)) fields.set(child.name, value);
  }
}

function decodeEntities(text: string): string | undefined {
  let bad = false;
  const out = text.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-z]+);|&/g, (whole, ref: string | undefined) => {
    if (ref === undefined) {
      bad = true;
      return whole;
    }
    switch (ref) {
      case 'lt':
        return '<';
      case 'gt':
        return '>';
      case 'amp':
        return '&';
      case 'quot':
        return '"';
      case 'apos':
        return "'";
    }
    const code = ref.startsWith('#x') ? parseInt(ref.slice(2), 16) : ref.startsWith('#') ? parseInt(ref.slice(1), 10) : NaN;
    if (!Number.isInteger(code) || code > 0x10ffff) {
      bad = true;
      return whole;
    }
    return String.fromCodePoint(code);
  });
  return bad ? undefined : out;
}

interface CallbackKeys {
  token: string;
  aesKey: Buffer;
  corpId: string;
}

function callbackKeys(account: AccountContext): CallbackKeys {
  const token = account.secrets['token'];
  const encodingAesKey = account.secrets['encoding_aes_key'];
  if (!token || !encodingAesKey) throw new InboundAuthError('chat_c: the account has no token/encoding_aes_key to verify callbacks with');
  const corpId = requireCorpId(account);
  const aesKey = Buffer.from(`${encodingAesKey}=`, 'base64');
  if (encodingAesKey.length !== 43 || aesKey.length !== 32) throw new InboundAuthError('chat_c: encoding_aes_key is not a 43-character EncodingAESKey');
  return { token, aesKey, corpId };
}

/** msg_signature = hex SHA-1 of token, timestamp, nonce and the ciphertext, sorted and joined. */
function verifySignature(keys: CallbackKeys, query: InboundRequest['query'], encrypted: string): void {
  const signature = query['msg_signature'];
  const timestamp = query['timestamp'];
  const nonce = query['nonce'];
  if (!signature || !timestamp || !nonce) throw new InboundAuthError('chat_c: callback without msg_signature/timestamp/nonce');
  const expected = createHash('sha1').update([keys.token, timestamp, nonce, encrypted].sort().join('')).digest();
  const given = /^[0-9a-fA-F]{40}$/.test(signature) ? Buffer.from(signature, 'hex') : Buffer.alloc(0);
  if (!constantTimeEqual(given, expected)) throw new InboundAuthError('chat_c: callback signature does not match');
}

/**
 * Decrypts a callback payload: AES-256-CBC with the key's first 16 bytes as IV, PKCS#7 padded to
 * 32-byte blocks (so Node's 16-byte auto padding is off); plaintext = 16 random bytes, a 4-byte
 * big-endian length, the message, the receiving corpid. A payload that does not decrypt under
 * the signed-off key, or was addressed to another corp, is treated as unauthenticated.
 */
function decrypt(keys: CallbackKeys, encrypted: string): string {
  let plain: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-cbc', keys.aesKey, keys.aesKey.subarray(0, 16));
    decipher.setAutoPadding(false);
    plain = Buffer.concat([decipher.update(Buffer.from(encrypted, 'base64')), decipher.final()]);
  } catch {
    throw new InboundAuthError('chat_c: callback payload does not decrypt with encoding_aes_key');
  }
  const pad = plain.length > 0 ? (plain[plain.length - 1] as number) : 0;
  if (pad < 1 || pad > 32 || pad > plain.length) throw new InboundAuthError('chat_c: callback payload does not decrypt with encoding_aes_key');
  plain = plain.subarray(0, plain.length - pad);
  if (plain.length < 20) throw new InboundAuthError('chat_c: callback payload does not decrypt with encoding_aes_key');
  const length = plain.readUInt32BE(16);
  if (20 + length > plain.length) throw new InboundAuthError('chat_c: callback payload does not decrypt with encoding_aes_key');
  const receiveId = plain.subarray(20 + length).toString('utf8');
  if (receiveId !== keys.corpId) throw new InboundAuthError('chat_c: callback is addressed to another corp');
  return plain.subarray(20, 20 + length).toString('utf8');
}

async function parseInbound(account: AccountContext, _io: AdapterIo, request: InboundRequest): Promise<InboundResult> {
  const keys = callbackKeys(account);
  if (request.method.toUpperCase() === 'GET') {
    // URL verification: echo the decrypted echostr as plain text.
    const echostr = request.query['echostr'];
    if (!echostr) throw new InboundParseError('chat_c: verification request without echostr');
    verifySignature(keys, request.query, echostr);
    return { kind: 'challenge', contentType: 'text/plain', body: decrypt(keys, echostr) };
  }
  const envelope = parseFlatXml(request.rawBody.toString('utf8'));
  const encrypted = envelope?.get('Encrypt');
  if (!encrypted) throw new InboundParseError('chat_c: callback body is not the encrypted XML envelope');
  verifySignature(keys, request.query, encrypted);
  const msg = parseFlatXml(decrypt(keys, encrypted));
  if (!msg) throw new InboundParseError('chat_c: decrypted callback is not XML');
  const msgType = msg.get('MsgType');
  if (!msgType) throw new InboundParseError('chat_c: callback without MsgType');
  if (msgType !== 'text') return { kind: 'ignored', reason: msgType === 'event' ? `event ${msg.get('Event') ?? ''}`.trim() : `MsgType ${msgType}` };
  const from = msg.get('FromUserName');
  const msgId = msg.get('MsgId');
  const text = msg.get('Content');
  if (!from || !msgId || text === undefined) throw new InboundParseError('chat_c: text callback lacks FromUserName, MsgId or Content');
  return { kind: 'message', message: { eventId: msgId, chatId: `user:${from}`, chatType: 'dm', senderId: from, text: text.trim() } };
}

export const wecom: ChannelAdapter = {
  platform: 'chat_c',
  fields: { settings: ['app_id', 'agent_id', 'api_base'], secrets: ['app_secret', 'token', 'encoding_aes_key'] },
  // WeCom caps text content at 2048 bytes of UTF-8, while parts are cut by UTF-16 units. One unit
  // is at most 3 UTF-8 bytes (a surrogate pair is 2 units for 4 bytes), so 680 units can never
  // pass 2040 bytes, whatever the script. Latin text gets shorter parts than it could; a
  // byte-aware split would need a different splitter than the shared one.
  textLimit: 680,
  // WeCom reads a non-empty answer as a passive reply and shows an error for anything unparsable.
  ack: { contentType: 'text/plain', body: '' },
  supports: { image: true, file: true, inbound: true },
  send,
  parseInbound,
};
