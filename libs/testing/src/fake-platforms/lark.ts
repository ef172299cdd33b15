import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { answerJson, parseJsonObject, readForm, startFakeServer } from './server.js';
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

export async function startFakeLark(opts: FakeLarkOptions = {}): Promise<FakeLark> {
  const appId = opts.appId ?? 'cli_fake_app';
  const appSecret = opts.appSecret ?? 'fake-app-secret';
  const verificationToken = opts.verificationToken ?? 'fake-verification-token';
  const encryptKey = opts.encryptKey;
  const tokens = new Map<string, number>(); // token → expiry (ms since epoch)
  const uploads = new Map<string, Upload>();
  let serial = 0;

  /** The Bearer token's problem as Lark words it, or undefined when it is valid. */
  function tokenProblem(req: http.IncomingMessage): { code: number; msg: string } | undefined {
    const auth = req.headers.authorization ?? '';
    const match = /^Bearer (\S+)$/.exec(auth);
    if (!match) return { code: 99991661, msg: 'Missing access token for authorization. Please make a request with token attached.' };
    const until = tokens.get(match[1]!);
    if (until === undefined || until <= Date.now()) {
      return { code: 99991663, msg: 'Invalid access token for authorization. Please make a request with token attached.' };
    }
    return undefined;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> {
    const route = `${req.method} ${url.pathname}`;

    if (route === 'POST /open-apis/auth/v3/tenant_access_token/internal') {
      const body = parseJsonObject(raw);
      if (typeof body?.app_id !== 'string' || typeof body.app_secret !== 'string') {
        return answerJson(res, 400, { code: 10003, msg: 'invalid param' });
      }
      if (body.app_id !== appId) return answerJson(res, 400, { code: 10003, msg: 'invalid param' });
      if (body.app_secret !== appSecret) return answerJson(res, 400, { code: 10014, msg: 'app secret invalid' });
      const token = `t-fake${++serial}${randomBytes(8).toString('hex')}`;
      tokens.set(token, Date.now() + fake.expireSeconds * 1000);
      fake.tokenFetches += 1;
      return answerJson(res, 200, { code: 0, msg: 'ok', tenant_access_token: token, expire: fake.expireSeconds });
    }

    if (route === 'POST /open-apis/im/v1/images' || route === 'POST /open-apis/im/v1/files') {
      const problem = tokenProblem(req);
      if (problem) return answerJson(res, 400, problem);
      let form: FormData;
      try {
        form = await readForm(req, raw);
      } catch {
        return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
      }
      const isImage = url.pathname.endsWith('/images');
      const part = form.get(isImage ? 'image' : 'file');
      if (!(part instanceof Blob) || part.size === 0) return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
      if (isImage) {
        const imageType = form.get('image_type');
        if (imageType !== 'message' && imageType !== 'avatar') return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
        const key = `img_v3_fake${++serial}`;
        uploads.set(key, { kind: 'image', fileName: part instanceof File ? part.name : '', bytes: part.size });
        return answerJson(res, 200, { code: 0, msg: 'success', data: { image_key: key } });
      }
      const fileType = form.get('file_type');
      const fileName = form.get('file_name');
      if (typeof fileType !== 'string' || !['opus', 'mp4', 'pdf', 'doc', 'xls', 'ppt', 'stream'].includes(fileType) || typeof fileName !== 'string' || !fileName) {
        return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
      }
      const key = `file_v3_fake${++serial}`;
      uploads.set(key, { kind: 'file', fileName, bytes: part.size });
      return answerJson(res, 200, { code: 0, msg: 'success', data: { file_key: key } });
    }

    if (route === 'POST /open-apis/im/v1/messages') {
      const failing = server.nextFailure();
      if (failing) {
        const { status, retryAfterSeconds, body } = failing;
        // Lark says how long to wait in x-ogw-ratelimit-reset, not Retry-After.
        const extra: Record<string, string> = retryAfterSeconds === undefined ? {} : { 'x-ogw-ratelimit-limit': '50', 'x-ogw-ratelimit-reset': String(retryAfterSeconds) };
        return answerJson(res, status, body ?? defaultFailureBody(status), extra);
      }
      const problem = tokenProblem(req);
      if (problem) return answerJson(res, 400, problem);
      const receiveIdType = url.searchParams.get('receive_id_type');
      const body = parseJsonObject(raw);
      if (!receiveIdType || !['open_id', 'user_id', 'union_id', 'email', 'chat_id'].includes(receiveIdType)) {
        return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
      }
      if (typeof body?.receive_id !== 'string' || typeof body.msg_type !== 'string' || typeof body.content !== 'string') {
        return answerJson(res, 400, { code: 99992402, msg: 'field validation failed' });
      }
      const content = parseJsonObject(Buffer.from(body.content));
      if (!content) return answerJson(res, 400, { code: 230001, msg: 'Your request contains an invalid request parameter.' });
      const messageId = `om_fake${++serial}`;
      let sent: FakeSentMessage;
      if (body.msg_type === 'text' && typeof content.text === 'string') {
        sent = { chatId: body.receive_id, kind: 'text', text: content.text, messageId };
      } else if ((body.msg_type === 'image' && typeof content.image_key === 'string') || (body.msg_type === 'file' && typeof content.file_key === 'string')) {
        const kind = body.msg_type;
        const key = (kind === 'image' ? content.image_key : content.file_key) as string;
        // Keys uploaded here are known; keys of the expected shape stand for earlier uploads.
        const upload = uploads.get(key);
        if ((upload && upload.kind !== kind) || (!upload && !key.startsWith(kind === 'image' ? 'img_' : 'file_'))) {
          return answerJson(res, 400, { code: 230001, msg: 'Your request contains an invalid request parameter.' });
        }
        sent = { chatId: body.receive_id, kind, key, messageId, ...(upload ? { fileName: upload.fileName, bytes: upload.bytes } : {}) };
      } else {
        return answerJson(res, 400, { code: 230001, msg: 'Your request contains an invalid request parameter.' });
      }
      fake.sent.push(sent);
      const now = String(Date.now());
      return answerJson(res, 200, {
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
          sender: { id: appId, id_type: 'app_id', sender_type: 'app', tenant_key: 'fake_tenant' },
          body: { content: body.content },
        },
      });
    }

    answerJson(res, 404, { code: 404, msg: 'page not found' });
  }

  /** Encrypts (with an Encrypt Key) a body the way Lark pushes it. */
  function seal(payload: unknown): string {
    const plain = JSON.stringify(payload);
    if (!encryptKey) return plain;
    const key = createHash('sha256').update(encryptKey, 'utf8').digest();
    const iv = randomBytes(16);
    const cipher = createCipheriv('aes-256-cbc', key, iv);
    const data = Buffer.concat([iv, cipher.update(plain, 'utf8'), cipher.final()]);
    return JSON.stringify({ encrypt: data.toString('base64') });
  }

  function signedHeaders(body: string): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    if (!encryptKey) return headers;
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(8).toString('hex');
    const signature = createHash('sha256').update(`${timestamp}${nonce}${encryptKey}${body}`, 'utf8').digest('hex');
    return { ...headers, 'x-lark-request-timestamp': timestamp, 'x-lark-request-nonce': nonce, 'x-lark-signature': signature };
  }

  const server = await startFakeServer({
    handle,
    crashed: (res, message) => answerJson(res, 500, { code: 1, msg: `fake chat_a: ${message}` }),
    maxBodyBytes: MAX_BODY,
  });
  const url = `${server.origin}/open-apis`;

  const fake: FakeLark = {
    url,
    account: {
      app_id: appId,
      app_secret: appSecret,
      token: verificationToken,
      ...(encryptKey ? { encrypt_key: encryptKey } : {}),
      api_base: url,
    },
    sent: [] as FakeSentMessage[],
    calls: server.calls,
    tokenFetches: 0,
    expireSeconds: opts.expireSeconds ?? 7200,
    revokeTokens() {
      tokens.clear();
    },
    failNext: server.failNext,
    deliver(payload) {
      const body = seal(payload);
      return { headers: signedHeaders(body), body };
    },
    inbound(event: FakeInboundEvent) {
      const createTime = String(Date.now());
      return fake.deliver({
        schema: '2.0',
        header: {
          event_id: randomUUID().replace(/-/g, ''),
          event_type: 'im.message.receive_v1',
          create_time: createTime,
          token: verificationToken,
          app_id: appId,
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
      });
    },
    handshake() {
      // Encrypted when the app has an Encrypt Key, but not signed: Lark's docs leave the
      // URL-verification request out of signature checking.
      const challenge = randomUUID();
      const body = seal({ challenge, token: verificationToken, type: 'url_verification' });
      return { headers: { 'content-type': 'application/json; charset=utf-8' }, body, method: 'POST', expect: JSON.stringify({ challenge }) };
    },
    close: server.close,
  };
  return fake;
}

function defaultFailureBody(status: number): { code: number; msg: string } {
  if (status === 429) return { code: 99991400, msg: 'request trigger frequency limit' };
  if (status === 401) return { code: 99991663, msg: 'Invalid access token for authorization. Please make a request with token attached.' };
  if (status >= 500) return { code: 1500, msg: 'Internal Error' };
  return { code: 230001, msg: 'Your request contains an invalid request parameter.' };
}
