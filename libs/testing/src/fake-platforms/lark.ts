import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { answerJson, findRoute, parseJsonObject, readForm, startFakeServer, type FakeRoutes, type FakeServer } from './server.js';
import type { FakeInboundEvent, FakePlatform, FakeSentMessage } from './types.js';

/**
 * Fake Feishu/Lark Open Platform for an app bot, from the public docs:
 * - `POST /open-apis/auth/v3/tenant_access_token/internal` `{app_id, app_secret}` →
 *   `{code: 0, msg: 'ok', tenant_access_token, expire}` (seconds).
 * - `POST /open-apis/im/v1/messages?receive_id_type=chat_id` (Bearer tenant token) with
 *   `{receive_id, msg_type, content}` where `content` is a JSON string → `{code: 0, data: {message_id, ...}}`.
 * - `POST /open-apis/im/v1/images` multipart `image_type`, `image` → `data.image_key`;
 *   `POST /open-apis/im/v1/files` multipart `file_type`, `file_name`, `file` → `data.file_key`.
 * - Errors are `{code, msg}`; a missing token is 99991661, an invalid/expired one 99991663; rate
 *   limits are HTTP 429 `{code: 99991400}` with `x-ogw-ratelimit-reset` (seconds).
 * - Event subscription v2.0 pushes; with an Encrypt Key the body is `{encrypt}` (AES-256-CBC,
 *   key SHA-256(encrypt key), random IV prepended, base64) and event pushes carry
 *   `X-Lark-Request-Timestamp`, `X-Lark-Request-Nonce` and `X-Lark-Signature`
 *   = hex SHA-256(timestamp + nonce + encrypt key + body).
 */

export interface FakeLarkOptions {
  appId?: string;
  appSecret?: string;
  /** The app's event Verification Token. */
  verificationToken?: string;
  /** The app's event Encrypt Key: events are then encrypted and signed. */
  encryptKey?: string;
  /** Lifetime of the tenant tokens handed out (default 7200, as Lark). */
  expireSeconds?: number;
}

export interface FakeLark extends FakePlatform {
  /** Lifetime of tokens handed out from now on; tokens past it are answered 99991663. */
  expireSeconds: number;
  /** Invalidates every token handed out so far: the next authorised call gets 99991663. */
  revokeTokens(): void;
  /** Any v2.0-or-other event body delivered as the platform would (encrypted and signed when the app has an Encrypt Key). */
  deliver(payload: unknown): { headers: Record<string, string>; body: string };
}

interface Upload {
  kind: 'image' | 'file';
  fileName: string;
  bytes: number;
}

const MAX_BODY = 40 * 1024 * 1024;

const FIELD_VALIDATION_FAILED = { code: 99992402, msg: 'field validation failed' };
const INVALID_PARAMETER = { code: 230001, msg: 'Your request contains an invalid request parameter.' };

export async function startFakeLark(opts: FakeLarkOptions = {}): Promise<FakeLark> {
  const api = new LarkApi(
    opts.appId ?? 'cli_fake_app',
    opts.appSecret ?? 'fake-app-secret',
    opts.verificationToken ?? 'fake-verification-token',
    opts.encryptKey,
    opts.expireSeconds ?? 7200,
  );
  const server = await startFakeServer({
    handle: (req, res, url, raw) => api.handle(req, res, url, raw),
    crashed: (res, message) => answerJson(res, 500, { code: 1, msg: `fake chat_a: ${message}` }),
    maxBodyBytes: MAX_BODY,
  });
  api.server = server;
  const url = `${server.origin}/open-apis`;
  return {
    url,
    account: {
      app_id: api.appId,
      app_secret: api.appSecret,
      token: api.verificationToken,
      ...(api.encryptKey ? { encrypt_key: api.encryptKey } : {}),
      api_base: url,
    },
    sent: api.sent,
    calls: server.calls,
    get tokenFetches() {
      return api.tokenFetches;
    },
    get expireSeconds() {
      return api.expireSeconds;
    },
    set expireSeconds(seconds: number) {
      api.expireSeconds = seconds;
    },
    revokeTokens: () => api.tokens.clear(),
    failNext: server.failNext,
    deliver: (payload) => api.deliver(payload),
    inbound: (event) => api.deliver(api.messageEvent(event)),
    handshake: () => api.handshake(),
    close: server.close,
  };
}

/** What the fake Lark knows (tokens, uploads, messages sent) and how it answers each route. */
class LarkApi {
  readonly sent: FakeSentMessage[] = [];
  /** Set once the server listens: sends take its queued failures. */
  server!: FakeServer;
  /** token → expiry (ms since epoch) */
  readonly tokens = new Map<string, number>();
  readonly #uploads = new Map<string, Upload>();
  tokenFetches = 0;
  #serial = 0;
  readonly #routes: FakeRoutes = {
    'POST /open-apis/auth/v3/tenant_access_token/internal': (_req, res, _url, raw) => this.issueToken(res, raw),
    'POST /open-apis/im/v1/images': (req, res, _url, raw) => this.upload(req, res, raw, 'image'),
    'POST /open-apis/im/v1/files': (req, res, _url, raw) => this.upload(req, res, raw, 'file'),
    'POST /open-apis/im/v1/messages': (req, res, url, raw) => this.sendMessage(req, res, url, raw),
  };

  constructor(
    readonly appId: string,
    readonly appSecret: string,
    readonly verificationToken: string,
    readonly encryptKey: string | undefined,
    /** Lifetime of tokens handed out from now on. */
    public expireSeconds: number,
  ) {}

  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void | Promise<void> {
    const route = findRoute(this.#routes, req, url);
    if (route) return route(req, res, url, raw);
    answerJson(res, 404, { code: 404, msg: 'page not found' });
  }

  /** The Bearer token's problem as Lark words it, or undefined when it is valid. */
  tokenProblem(req: http.IncomingMessage): { code: number; msg: string } | undefined {
    const auth = req.headers.authorization ?? '';
    const match = /^Bearer (\S+)$/.exec(auth);
    if (!match) return { code: 99991661, msg: 'Missing access token for authorization. Please make a request with token attached.' };
    const until = this.tokens.get(match[1]!);
    if (until === undefined || until <= Date.now()) {
      return { code: 99991663, msg: 'Invalid access token for authorization. Please make a request with token attached.' };
    }
    return undefined;
  }

  issueToken(res: http.ServerResponse, raw: Buffer): void {
    const body = parseJsonObject(raw);
    if (typeof body?.app_id !== 'string' || typeof body.app_secret !== 'string') {
      return answerJson(res, 400, { code: 10003, msg: 'invalid param' });
    }
    if (body.app_id !== this.appId) return answerJson(res, 400, { code: 10003, msg: 'invalid param' });
    if (body.app_secret !== this.appSecret) return answerJson(res, 400, { code: 10014, msg: 'app secret invalid' });
    const token = `t-fake${++this.#serial}${randomBytes(8).toString('hex')}`;
    this.tokens.set(token, Date.now() + this.expireSeconds * 1000);
    this.tokenFetches += 1;
    answerJson(res, 200, { code: 0, msg: 'ok', tenant_access_token: token, expire: this.expireSeconds });
  }

  async upload(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer, kind: 'image' | 'file'): Promise<void> {
    const problem = this.tokenProblem(req);
    if (problem) return answerJson(res, 400, problem);
    let form: FormData;
    try {
      form = await readForm(req, raw);
    } catch {
      return answerJson(res, 400, FIELD_VALIDATION_FAILED);
    }
    const part = form.get(kind);
    if (!(part instanceof Blob) || part.size === 0) return answerJson(res, 400, FIELD_VALIDATION_FAILED);
    if (kind === 'image') {
      const imageType = form.get('image_type');
      if (imageType !== 'message' && imageType !== 'avatar') return answerJson(res, 400, FIELD_VALIDATION_FAILED);
      const key = `img_v3_fake${++this.#serial}`;
      this.#uploads.set(key, { kind: 'image', fileName: part instanceof File ? part.name : '', bytes: part.size });
      return answerJson(res, 200, { code: 0, msg: 'success', data: { image_key: key } });
    }
    const fileType = form.get('file_type');
    const fileName = form.get('file_name');
    if (typeof fileType !== 'string' || !['opus', 'mp4', 'pdf', 'doc', 'xls', 'ppt', 'stream'].includes(fileType) || typeof fileName !== 'string' || !fileName) {
      return answerJson(res, 400, FIELD_VALIDATION_FAILED);
    }
    const key = `file_v3_fake${++this.#serial}`;
    this.#uploads.set(key, { kind: 'file', fileName, bytes: part.size });
    answerJson(res, 200, { code: 0, msg: 'success', data: { file_key: key } });
  }

  sendMessage(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void {
    const failing = this.server.nextFailure();
    if (failing) {
      const { status, retryAfterSeconds, body } = failing;
      // Lark says how long to wait in x-ogw-ratelimit-reset, not Retry-After.
      const extra: Record<string, string> = retryAfterSeconds === undefined ? {} : { 'x-ogw-ratelimit-limit': '50', 'x-ogw-ratelimit-reset': String(retryAfterSeconds) };
      return answerJson(res, status, body ?? defaultFailureBody(status), extra);
    }
    const problem = this.tokenProblem(req);
    if (problem) return answerJson(res, 400, problem);
    const receiveIdType = url.searchParams.get('receive_id_type');
    const body = parseJsonObject(raw);
    if (!receiveIdType || !['open_id', 'user_id', 'union_id', 'email', 'chat_id'].includes(receiveIdType)) {
      return answerJson(res, 400, FIELD_VALIDATION_FAILED);
    }
    if (typeof body?.receive_id !== 'string' || typeof body.msg_type !== 'string' || typeof body.content !== 'string') {
      return answerJson(res, 400, FIELD_VALIDATION_FAILED);
    }
    const content = parseJsonObject(Buffer.from(body.content));
    if (!content) return answerJson(res, 400, INVALID_PARAMETER);
    const messageId = `om_fake${++this.#serial}`;
    const sent = this.sentMessage(body.receive_id, body.msg_type, content, messageId);
    if (!sent) return answerJson(res, 400, INVALID_PARAMETER);
    this.sent.push(sent);
    const now = String(Date.now());
    answerJson(res, 200, {
      code: 0,
      msg: 'success',
      data: {
        message_id: messageId,
        msg_type: body.msg_type,
        create_time: now,
        update_time: now,
        deleted: false,
        updated: false,
        chat_id: body.receive_id,
        sender: { id: this.appId, id_type: 'app_id', sender_type: 'app', tenant_key: 'fake_tenant' },
        body: { content: body.content },
      },
    });
  }

  /** What a send of `msgType` with `content` delivers, or undefined when Lark would refuse it. */
  sentMessage(chatId: string, msgType: string, content: Record<string, unknown>, messageId: string): FakeSentMessage | undefined {
    if (msgType === 'text' && typeof content.text === 'string') return { chatId, kind: 'text', text: content.text, messageId };
    if (!((msgType === 'image' && typeof content.image_key === 'string') || (msgType === 'file' && typeof content.file_key === 'string'))) return undefined;
    const kind = msgType;
    const key = (kind === 'image' ? content.image_key : content.file_key) as string;
    // Keys uploaded here are known; keys of the expected shape stand for earlier uploads.
    const upload = this.#uploads.get(key);
    if ((upload && upload.kind !== kind) || (!upload && !key.startsWith(kind === 'image' ? 'img_' : 'file_'))) return undefined;
    return { chatId, kind, key, messageId, ...(upload ? { fileName: upload.fileName, bytes: upload.bytes } : {}) };
  }

  /** A body delivered as Lark pushes it: encrypted and signed when the app has an Encrypt Key. */
  deliver(payload: unknown): { headers: Record<string, string>; body: string } {
    const body = this.seal(payload);
    return { headers: this.signedHeaders(body), body };
  }

  /** Encrypts (with an Encrypt Key) a body the way Lark pushes it. */
  seal(payload: unknown): string {
    const plain = JSON.stringify(payload);
    if (!this.encryptKey) return plain;
    const key = createHash('sha256').update(this.encryptKey, 'utf8').digest();
    const iv = randomBytes(16);
    const cipher = createCipheriv('aes-256-cbc', key, iv);
    const data = Buffer.concat([iv, cipher.update(plain, 'utf8'), cipher.final()]);
    return JSON.stringify({ encrypt: data.toString('base64') });
  }

  signedHeaders(body: string): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    if (!this.encryptKey) return headers;
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(8).toString('hex');
    const signature = createHash('sha256').update(`${timestamp}${nonce}${this.encryptKey}${body}`, 'utf8').digest('hex');
    return { ...headers, 'x-lark-request-timestamp': timestamp, 'x-lark-request-nonce': nonce, 'x-lark-signature': signature };
  }

  /** The v2.0 `im.message.receive_v1` event of a text message. */
  messageEvent(event: FakeInboundEvent): Record<string, unknown> {
    const createTime = String(Date.now());
    return {
      schema: '2.0',
      header: {
        event_id: randomUUID().replace(/-/g, ''),
        event_type: 'im.message.receive_v1',
        create_time: createTime,
        token: this.verificationToken,
        app_id: this.appId,
        tenant_key: 'fake_tenant',
      },
      event: {
        sender: {
          sender_id: { union_id: `on_${event.senderId}`, user_id: `u_${event.senderId}`, open_id: event.senderId },
          sender_type: 'user',
          tenant_key: 'fake_tenant',
        },
        message: {
          message_id: event.eventId,
          create_time: createTime,
          update_time: createTime,
          chat_id: event.chatId,
          chat_type: event.chatType === 'dm' ? 'p2p' : 'group',
          message_type: 'text',
          content: JSON.stringify({ text: event.text }),
        },
      },
    };
  }

  handshake(): { headers: Record<string, string>; body: string; method: 'POST'; expect: string } {
    // Encrypted when the app has an Encrypt Key, but not signed: Lark's docs leave the
    // URL-verification request out of signature checking.
    const challenge = randomUUID();
    const body = this.seal({ challenge, token: this.verificationToken, type: 'url_verification' });
    return { headers: { 'content-type': 'application/json; charset=utf-8' }, body, method: 'POST', expect: JSON.stringify({ challenge }) };
  }
}

function defaultFailureBody(status: number): { code: number; msg: string } {
  if (status === 429) return { code: 99991400, msg: 'request trigger frequency limit' };
  if (status === 401) return { code: 99991663, msg: 'Invalid access token for authorization. Please make a request with token attached.' };
  if (status >= 500) return { code: 1500, msg: 'Internal Error' };
  return { code: 230001, msg: 'Your request contains an invalid request parameter.' };
}
