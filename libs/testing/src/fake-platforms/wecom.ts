import { createCipheriv, createHash, randomBytes, randomInt } from 'node:crypto';
import type http from 'node:http';
import { answerJson, answerText, parseJsonObject, readForm, retryAfterHeaders, startFakeServer } from './server.js';
import type { FakeInboundEvent, FakePlatform, FakeSentMessage } from './types.js';

/**
 * A fake WeCom (WeChat Work) for a self-built application, from WeCom's public server API docs:
 *
 * - `GET /cgi-bin/gettoken?corpid=..&corpsecret=..` -> `{errcode: 0, errmsg: 'ok', access_token, expires_in}`
 * - `POST /cgi-bin/message/send?access_token=..` `{touser, msgtype, agentid, text|image|file}` ->
 *   `{errcode: 0, errmsg: 'ok', invaliduser, invalidparty, invalidtag, unlicenseduser, msgid, response_code}`
 * - `POST /cgi-bin/appchat/send?access_token=..` `{chatid, msgtype, ...}` -> `{errcode: 0, errmsg: 'ok'}`
 * - `POST /cgi-bin/media/upload?access_token=..&type=image|voice|video|file`, multipart field
 *   `media` -> `{errcode: 0, errmsg: '', type, media_id, created_at}`
 *
 * Errors are `{errcode, errmsg}` in HTTP 200 answers (40014 invalid access_token, 42001 expired,
 * 40001 invalid secret, 45009 frequency limit, -1 system busy).
 *
 * Callbacks are encrypted and signed as WeCom does it: AES-256-CBC with key = base64(EncodingAESKey
 * + '='), IV = its first 16 bytes, PKCS#7 padded to 32 bytes, over 16 random bytes + 4-byte length
 * + message XML + corpid; msg_signature = sha1(sorted [token, timestamp, nonce, Encrypt] joined),
 * sent in the query string with timestamp and nonce.
 */
export interface FakeWeCom extends FakePlatform {
  corpId: string;
  corpSecret: string;
  agentId: string;
  token: string;
  encodingAesKey: string;
  /** Expires every token handed out so far: calls answer 42001 until a new one is fetched. */
  revokeTokens(): void;
  /** Any decrypted callback message XML, encrypted and signed as WeCom would post it. */
  inboundXml(msgXml: string): { headers: Record<string, string>; body: string; query: Record<string, string> };
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const randomAlnum = (n: number): string => Array.from({ length: n }, () => ALNUM.charAt(randomInt(ALNUM.length))).join('');
/** CDATA cannot hold `]]>`: it is split across two sections, as XML writers do. */
const cdata = (text: string): string => `<![CDATA[${text.split(']]>').join(']]]]><![CDATA[>')}]]>`;

const SEND_KINDS: Record<string, FakeSentMessage['kind']> = { text: 'text', markdown: 'text', image: 'image', file: 'file' };

export async function startFakeWeCom(
  opts: { corpId?: string; corpSecret?: string; agentId?: string; token?: string; encodingAesKey?: string } = {},
): Promise<FakeWeCom> {
  const corpId = opts.corpId ?? 'wwfakecorp0000001';
  const corpSecret = opts.corpSecret ?? `fake-corpsecret-${randomAlnum(24)}`;
  const agentId = opts.agentId ?? '1000002';
  const token = opts.token ?? randomAlnum(16);
  const encodingAesKey = opts.encodingAesKey ?? randomAlnum(43);
  const aesKey = Buffer.from(`${encodingAesKey}=`, 'base64');
  if (aesKey.length !== 32) throw new Error('encodingAesKey must be 43 base64 characters');

  const validTokens = new Set<string>();
  const revokedTokens = new Set<string>();
  const media = new Map<string, { bytes: number; fileName: string; type: string }>();
  const sent: FakeSentMessage[] = [];
  let tokenFetches = 0;
  let nextMsg = 1;

  /** A string body is a front end's HTML error page; WeCom itself answers JSON. */
  const reply = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void =>
    typeof body === 'string' ? answerText(res, status, body, 'text/html', headers) : answerJson(res, status, body, headers, 'application/json; charset=UTF-8');
  const err = (res: http.ServerResponse, errcode: number, errmsg: string): void =>
    reply(res, 200, { errcode, errmsg: `${errmsg}, hint: [${Math.floor(Date.now() / 1000)}_fake], more info at https://open.work.weixin.qq.com/devtool/query?e=${errcode}` });

  const defaultFailureBody = (status: number): unknown => {
    if (status === 429) return { errcode: 45009, errmsg: 'api freq out of limit' };
    if (status >= 500) return '<html><body>502 Bad Gateway</body></html>';
    return { errcode: -1, errmsg: 'system busy' };
  };

  /** True when the call carries a live token; otherwise the error has been answered. */
  const checkToken = (res: http.ServerResponse, url: URL): boolean => {
    const t = url.searchParams.get('access_token');
    if (!t) err(res, 41001, 'access_token missing');
    else if (revokedTokens.has(t)) err(res, 42001, 'access_token expired');
    else if (!validTokens.has(t)) err(res, 40014, 'invalid access_token');
    else return true;
    return false;
  };

  const handleToken = (res: http.ServerResponse, url: URL): void => {
    if (url.searchParams.get('corpid') !== corpId) return err(res, 40013, 'invalid corpid');
    if (url.searchParams.get('corpsecret') !== corpSecret) return err(res, 40001, 'invalid credential');
    tokenFetches++;
    const t = `wc${tokenFetches}${randomAlnum(40)}`;
    validTokens.add(t);
    reply(res, 200, { errcode: 0, errmsg: 'ok', access_token: t, expires_in: 7200 });
  };

  const handleUpload = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> => {
    if (!checkToken(res, url)) return;
    const type = url.searchParams.get('type') ?? '';
    if (!['image', 'voice', 'video', 'file'].includes(type)) return err(res, 40004, 'invalid media type');
    let file: File | string | null = null;
    try {
      file = (await readForm(req, raw)).get('media');
    } catch {
      file = null;
    }
    if (!file || typeof file === 'string') return err(res, 41005, 'media data missing');
    if (file.size < 5) return err(res, 40006, 'invalid file size');
    const mediaId = `3${randomAlnum(60)}`;
    media.set(mediaId, { bytes: file.size, fileName: file.name, type });
    reply(res, 200, { errcode: 0, errmsg: '', type, media_id: mediaId, created_at: String(Math.floor(Date.now() / 1000)) });
  };

  /** The fields every msgtype carries, or undefined when the error has been answered. */
  const readMessage = (res: http.ServerResponse, body: Record<string, unknown>): Omit<FakeSentMessage, 'chatId' | 'messageId'> | undefined => {
    const msgtype = body['msgtype'];
    const kind = typeof msgtype === 'string' ? SEND_KINDS[msgtype] : undefined;
    if (!kind || typeof msgtype !== 'string') {
      err(res, 40008, 'invalid message type');
      return undefined;
    }
    const part = body[msgtype];
    const fields = typeof part === 'object' && part !== null ? (part as Record<string, unknown>) : undefined;
    if (kind === 'text') {
      const content = fields?.['content'];
      if (typeof content !== 'string' || !content) {
        err(res, 41009, 'missing content');
        return undefined;
      }
      if (Buffer.byteLength(content) > 2048) {
        err(res, 44004, 'content size out of limit');
        return undefined;
      }
      return { kind, text: content };
    }
    const mediaId = fields?.['media_id'];
    if (typeof mediaId !== 'string' || !mediaId) {
      err(res, 40007, 'invalid media_id');
      return undefined;
    }
    const stored = media.get(mediaId);
    return { kind, key: mediaId, ...(stored ? { bytes: stored.bytes, fileName: stored.fileName } : {}) };
  };

  const handleSend = (res: http.ServerResponse, url: URL, raw: Buffer): void => {
    if (!checkToken(res, url)) return;
    const failure = server.nextFailure();
    if (failure) return reply(res, failure.status, failure.body ?? defaultFailureBody(failure.status), retryAfterHeaders(failure));
    const body = parseJsonObject(raw);
    if (!body) return err(res, 47001, 'data format error');
    if (url.pathname === '/cgi-bin/appchat/send') {
      const chatid = body['chatid'];
      if (typeof chatid !== 'string' || !chatid) return err(res, 86003, 'chatid not found');
      const message = readMessage(res, body);
      if (!message) return;
      sent.push({ chatId: chatid, messageId: '', ...message });
      return reply(res, 200, { errcode: 0, errmsg: 'ok' });
    }
    const agentid = body['agentid'];
    if (agentid === undefined || String(agentid) !== agentId) return err(res, 40056, 'invalid agentid');
    const touser = body['touser'];
    if (typeof touser !== 'string' || !touser) return err(res, 40058, 'touser, toparty, totag all empty');
    const message = readMessage(res, body);
    if (!message) return;
    const msgid = `fake_msgid_${nextMsg++}_${randomAlnum(12)}`;
    for (const user of touser.split('|')) sent.push({ chatId: `user:${user}`, messageId: msgid, ...message });
    reply(res, 200, { errcode: 0, errmsg: 'ok', invaliduser: '', invalidparty: '', invalidtag: '', unlicenseduser: '', msgid, response_code: '' });
  };

  const server = await startFakeServer({
    handle(req, res, url, raw) {
      if (url.pathname === '/cgi-bin/gettoken' && req.method === 'GET') return handleToken(res, url);
      if (req.method !== 'POST') return reply(res, 404, { errcode: 404, errmsg: 'not found' });
      switch (url.pathname) {
        case '/cgi-bin/media/upload':
          return handleUpload(req, res, url, raw);
        case '/cgi-bin/message/send':
        case '/cgi-bin/appchat/send':
          return handleSend(res, url, raw);
        default:
          return reply(res, 404, { errcode: 404, errmsg: 'not found' });
      }
    },
    crashed: (res) => reply(res, 500, { errcode: -1, errmsg: 'system busy' }),
    mask: { query: { access_token: '<token>', corpsecret: '<secret>' } },
  });
  const url = server.origin;

  const encrypt = (plain: string): string => {
    const msg = Buffer.from(plain, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(msg.length);
    const body = Buffer.concat([randomBytes(16), length, msg, Buffer.from(corpId, 'utf8')]);
    const pad = 32 - (body.length % 32);
    const cipher = createCipheriv('aes-256-cbc', aesKey, aesKey.subarray(0, 16));
    cipher.setAutoPadding(false);
    return Buffer.concat([cipher.update(Buffer.concat([body, Buffer.alloc(pad, pad)])), cipher.final()]).toString('base64');
  };
  const signed = (encrypted: string): { timestamp: string; nonce: string; msg_signature: string } => {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = String(randomInt(1_000_000_000, 9_999_999_999));
    const msg_signature = createHash('sha1').update([token, timestamp, nonce, encrypted].sort().join('')).digest('hex');
    return { msg_signature, timestamp, nonce };
  };
  const inboundXml = (msgXml: string): { headers: Record<string, string>; body: string; query: Record<string, string> } => {
    const encrypted = encrypt(msgXml);
    const body = `<xml><ToUserName>${cdata(corpId)}</ToUserName><Encrypt>${cdata(encrypted)}</Encrypt><AgentID>${cdata(agentId)}</AgentID></xml>`;
    return { headers: { 'content-type': 'text/xml' }, body, query: signed(encrypted) };
  };

  return {
    url,
    account: { app_id: corpId, app_secret: corpSecret, agent_id: agentId, token, encoding_aes_key: encodingAesKey, api_base: url },
    corpId,
    corpSecret,
    agentId,
    token,
    encodingAesKey,
    sent,
    calls: server.calls,
    get tokenFetches() {
      return tokenFetches;
    },
    failNext: server.failNext,
    revokeTokens() {
      for (const t of validTokens) revokedTokens.add(t);
      validTokens.clear();
    },
    inboundXml,
    inbound(event: FakeInboundEvent) {
      // An app's callback carries only messages members send to the app: there are no group events.
      if (event.chatType !== 'dm') throw new Error('WeCom app callbacks carry direct messages only');
      const xml =
        `<xml><ToUserName>${cdata(corpId)}</ToUserName><FromUserName>${cdata(event.senderId)}</FromUserName>` +
        `<CreateTime>${Math.floor(Date.now() / 1000)}</CreateTime><MsgType>${cdata('text')}</MsgType>` +
        `<Content>${cdata(event.text)}</Content><MsgId>${event.eventId}</MsgId><AgentID>${agentId}</AgentID></xml>`;
      return inboundXml(xml);
    },
    handshake() {
      const plain = String(randomInt(1_000_000_000_000, 9_999_999_999_999));
      const echostr = encrypt(plain);
      return { method: 'GET' as const, headers: {}, body: '', query: { ...signed(echostr), echostr }, expect: plain };
    },
    close: server.close,
  };
}
