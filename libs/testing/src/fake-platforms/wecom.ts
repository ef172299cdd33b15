import { createCipheriv, createHash, randomBytes, randomInt } from 'node:crypto';
import type http from 'node:http';
import { answerJson, answerText, findRoute, parseJsonObject, readForm, retryAfterHeaders, startFakeServer, type FakeRoutes, type FakeServer } from './server.js';
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

interface WeComOptions {
  corpId?: string;
  corpSecret?: string;
  agentId?: string;
  token?: string;
  encodingAesKey?: string;
}

export async function startFakeWeCom(opts: WeComOptions = {}): Promise<FakeWeCom> {
  const api = new WeComApi(opts);
  const server = await startFakeServer({
    handle: (req, res, url, raw) => api.handle(req, res, url, raw),
    crashed: (res) => reply(res, 500, { errcode: -1, errmsg: 'system busy' }),
    mask: { query: { access_token: '<token>', corpsecret: '<secret>' } },
  });
  api.server = server;
  const url = server.origin;
  const { corpId, corpSecret, agentId, token, encodingAesKey } = api;
  return {
    url,
    account: { app_id: corpId, app_secret: corpSecret, agent_id: agentId, token, encoding_aes_key: encodingAesKey, api_base: url },
    corpId,
    corpSecret,
    agentId,
    token,
    encodingAesKey,
    sent: api.sent,
    calls: server.calls,
    get tokenFetches() {
      return api.tokenFetches;
    },
    failNext: server.failNext,
    revokeTokens: () => api.revokeTokens(),
    inboundXml: (msgXml) => api.inboundXml(msgXml),
    inbound: (event) => api.inboundXml(api.textMessageXml(event)),
    handshake: () => api.handshake(),
    close: server.close,
  };
}

/** A string body is a front end's HTML error page; WeCom itself answers JSON. */
function reply(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (typeof body === 'string') return answerText(res, status, body, 'text/html', headers);
  answerJson(res, status, body, headers, 'application/json; charset=UTF-8');
}

/** WeCom's error answer: HTTP 200 with the code, and a hint like the real one's. */
function err(res: http.ServerResponse, errcode: number, errmsg: string): void {
  reply(res, 200, { errcode, errmsg: `${errmsg}, hint: [${Math.floor(Date.now() / 1000)}_fake], more info at https://open.work.weixin.qq.com/devtool/query?e=${errcode}` });
}

function defaultFailureBody(status: number): unknown {
  if (status === 429) return { errcode: 45009, errmsg: 'api freq out of limit' };
  if (status >= 500) return '<html><body>502 Bad Gateway</body></html>';
  return { errcode: -1, errmsg: 'system busy' };
}

/** A sent message without its chat and id: what every msgtype carries. */
type MessageFields = Omit<FakeSentMessage, 'chatId' | 'messageId'>;

/** Thrown by a check; the route answers it as WeCom's `{errcode, errmsg}`. */
class WeComError extends Error {
  constructor(
    readonly errcode: number,
    readonly errmsg: string,
  ) {
    super(errmsg);
  }
}

/** What the fake WeCom knows (tokens, media, messages sent) and how it answers each route. */
class WeComApi {
  readonly corpId: string;
  readonly corpSecret: string;
  readonly agentId: string;
  readonly token: string;
  readonly encodingAesKey: string;
  readonly #aesKey: Buffer;
  readonly sent: FakeSentMessage[] = [];
  /** Set once the server listens: sends take its queued failures. */
  server!: FakeServer;
  tokenFetches = 0;
  readonly #validTokens = new Set<string>();
  readonly #revokedTokens = new Set<string>();
  readonly #media = new Map<string, { bytes: number; fileName: string; type: string }>();
  #nextMsg = 1;
  readonly #routes: FakeRoutes = {
    'GET /cgi-bin/gettoken': (_req, res, url) => this.issueToken(res, url),
    'POST /cgi-bin/media/upload': (req, res, url, raw) => this.upload(req, res, url, raw),
    'POST /cgi-bin/message/send': (_req, res, url, raw) => this.send(res, url, raw, (body, message) => this.sendToUsers(res, body, message)),
    'POST /cgi-bin/appchat/send': (_req, res, url, raw) => this.send(res, url, raw, (body, message) => this.sendToChat(res, body, message)),
  };

  constructor(opts: WeComOptions) {
    this.corpId = opts.corpId ?? 'wwfakecorp0000001';
    this.corpSecret = opts.corpSecret ?? `fake-corpsecret-${randomAlnum(24)}`;
    this.agentId = opts.agentId ?? '1000002';
    this.token = opts.token ?? randomAlnum(16);
    this.encodingAesKey = opts.encodingAesKey ?? randomAlnum(43);
    this.#aesKey = Buffer.from(`${this.encodingAesKey}=`, 'base64');
    if (this.#aesKey.length !== 32) throw new Error('encodingAesKey must be 43 base64 characters');
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void | Promise<void> {
    const route = findRoute(this.#routes, req, url);
    if (route) return route(req, res, url, raw);
    reply(res, 404, { errcode: 404, errmsg: 'not found' });
  }

  revokeTokens(): void {
    for (const t of this.#validTokens) this.#revokedTokens.add(t);
    this.#validTokens.clear();
  }

  /** True when the call carries a live token; otherwise the error has been answered. */
  checkToken(res: http.ServerResponse, url: URL): boolean {
    const t = url.searchParams.get('access_token');
    if (!t) err(res, 41001, 'access_token missing');
    else if (this.#revokedTokens.has(t)) err(res, 42001, 'access_token expired');
    else if (!this.#validTokens.has(t)) err(res, 40014, 'invalid access_token');
    else return true;
    return false;
  }

  issueToken(res: http.ServerResponse, url: URL): void {
    if (url.searchParams.get('corpid') !== this.corpId) return err(res, 40013, 'invalid corpid');
    if (url.searchParams.get('corpsecret') !== this.corpSecret) return err(res, 40001, 'invalid credential');
    this.tokenFetches++;
    const t = `wc${this.tokenFetches}${randomAlnum(40)}`;
    this.#validTokens.add(t);
    reply(res, 200, { errcode: 0, errmsg: 'ok', access_token: t, expires_in: 7200 });
  }

  async upload(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> {
    if (!this.checkToken(res, url)) return;
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
    this.#media.set(mediaId, { bytes: file.size, fileName: file.name, type });
    reply(res, 200, { errcode: 0, errmsg: '', type, media_id: mediaId, created_at: String(Math.floor(Date.now() / 1000)) });
  }

  /** What both send routes check first; `deliver` checks the addressee, reads the message and answers. */
  send(res: http.ServerResponse, url: URL, raw: Buffer, deliver: (body: Record<string, unknown>, message: () => MessageFields) => void): void {
    if (!this.checkToken(res, url)) return;
    const failure = this.server.nextFailure();
    if (failure) return reply(res, failure.status, failure.body ?? defaultFailureBody(failure.status), retryAfterHeaders(failure));
    const body = parseJsonObject(raw);
    if (!body) return err(res, 47001, 'data format error');
    try {
      deliver(body, () => this.readMessage(body));
    } catch (e) {
      if (e instanceof WeComError) return err(res, e.errcode, e.errmsg);
      throw e;
    }
  }

  sendToChat(res: http.ServerResponse, body: Record<string, unknown>, message: () => MessageFields): void {
    const chatid = body['chatid'];
    if (typeof chatid !== 'string' || !chatid) throw new WeComError(86003, 'chatid not found');
    this.sent.push({ chatId: chatid, messageId: '', ...message() });
    reply(res, 200, { errcode: 0, errmsg: 'ok' });
  }

  sendToUsers(res: http.ServerResponse, body: Record<string, unknown>, message: () => MessageFields): void {
    const agentid = body['agentid'];
    if (agentid === undefined || String(agentid) !== this.agentId) throw new WeComError(40056, 'invalid agentid');
    const touser = body['touser'];
    if (typeof touser !== 'string' || !touser) throw new WeComError(40058, 'touser, toparty, totag all empty');
    const fields = message();
    const msgid = `fake_msgid_${this.#nextMsg++}_${randomAlnum(12)}`;
    for (const user of touser.split('|')) this.sent.push({ chatId: `user:${user}`, messageId: msgid, ...fields });
    reply(res, 200, { errcode: 0, errmsg: 'ok', invaliduser: '', invalidparty: '', invalidtag: '', unlicenseduser: '', msgid, response_code: '' });
  }

  /** The fields every msgtype carries; a WeComError when WeCom would refuse them. */
  readMessage(body: Record<string, unknown>): MessageFields {
    const msgtype = body['msgtype'];
    const kind = typeof msgtype === 'string' ? SEND_KINDS[msgtype] : undefined;
    if (!kind || typeof msgtype !== 'string') throw new WeComError(40008, 'invalid message type');
    const part = body[msgtype];
    const fields = typeof part === 'object' && part !== null ? (part as Record<string, unknown>) : undefined;
    if (kind === 'text') {
      const content = fields?.['content'];
      if (typeof content !== 'string' || !content) throw new WeComError(41009, 'missing content');
      if (Buffer.byteLength(content) > 2048) throw new WeComError(44004, 'content size out of limit');
      return { kind, text: content };
    }
    const mediaId = fields?.['media_id'];
    if (typeof mediaId !== 'string' || !mediaId) throw new WeComError(40007, 'invalid media_id');
    const stored = this.#media.get(mediaId);
    return { kind, key: mediaId, ...(stored ? { bytes: stored.bytes, fileName: stored.fileName } : {}) };
  }

  encrypt(plain: string): string {
    const msg = Buffer.from(plain, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(msg.length);
    const body = Buffer.concat([randomBytes(16), length, msg, Buffer.from(this.corpId, 'utf8')]);
    const pad = 32 - (body.length % 32);
    const cipher = createCipheriv('aes-256-cbc', this.#aesKey, this.#aesKey.subarray(0, 16));
    cipher.setAutoPadding(false);
    return Buffer.concat([cipher.update(Buffer.concat([body, Buffer.alloc(pad, pad)])), cipher.final()]).toString('base64');
  }

  signed(encrypted: string): { timestamp: string; nonce: string; msg_signature: string } {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = String(randomInt(1_000_000_000, 9_999_999_999));
    const msg_signature = createHash('sha1').update([this.token, timestamp, nonce, encrypted].sort().join('')).digest('hex');
    return { msg_signature, timestamp, nonce };
  }

  inboundXml(msgXml: string): { headers: Record<string, string>; body: string; query: Record<string, string> } {
    const encrypted = this.encrypt(msgXml);
    const body = `<xml><ToUserName>${cdata(this.corpId)}</ToUserName><Encrypt>${cdata(encrypted)}</Encrypt><AgentID>${cdata(this.agentId)}</AgentID></xml>`;
    return { headers: { 'content-type': 'text/xml' }, body, query: this.signed(encrypted) };
  }

  textMessageXml(event: FakeInboundEvent): string {
    // An app's callback carries only messages members send to the app: there are no group events.
    if (event.chatType !== 'dm') throw new Error('WeCom app callbacks carry direct messages only');
    return (
      `<xml><ToUserName>${cdata(this.corpId)}</ToUserName><FromUserName>${cdata(event.senderId)}</FromUserName>` +
      `<CreateTime>${Math.floor(Date.now() / 1000)}</CreateTime><MsgType>${cdata('text')}</MsgType>` +
      `<Content>${cdata(event.text)}</Content><MsgId>${event.eventId}</MsgId><AgentID>${this.agentId}</AgentID></xml>`
    );
  }

  handshake(): { method: 'GET'; headers: Record<string, string>; body: string; query: Record<string, string>; expect: string } {
    const plain = String(randomInt(1_000_000_000_000, 9_999_999_999_999));
    const echostr = this.encrypt(plain);
    return { method: 'GET', headers: {}, body: '', query: { ...this.signed(echostr), echostr }, expect: plain };
  }
}
