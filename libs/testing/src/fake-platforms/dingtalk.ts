import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { answerJson, findRoute, parseJsonObject, readForm, retryAfterHeaders, startFakeServer, type FakeRoutes, type FakeServer } from './server.js';
import type { FakeInboundEvent, FakePlatform, FakeSentMessage } from './types.js';

/**
 * A fake DingTalk for an enterprise-internal app's robot, from DingTalk's public API docs:
 *
 * - api.dingtalk.com: `POST /v1.0/oauth2/accessToken {appKey, appSecret}` -> `{accessToken, expireIn}`;
 *   `POST /v1.0/robot/groupMessages/send {robotCode, openConversationId, msgKey, msgParam}` and
 *   `POST /v1.0/robot/oToMessages/batchSend {robotCode, userIds, msgKey, msgParam}` with the token
 *   in `x-acs-dingtalk-access-token` -> `{processQueryKey}`. Errors are non-2xx with
 *   `{code, message, requestid}` (401 `InvalidAuthentication` for a bad token).
 * - oapi.dingtalk.com: `POST /media/upload?access_token=..&type=image|voice|video|file`, multipart
 *   field `media` -> `{errcode: 0, errmsg: 'ok', media_id, type, created_at}`; errors are
 *   `{errcode, errmsg}` in 200 answers (40014 for a bad token).
 *
 * Both hosts are served here, which is why `account` sets only `api_base` (the adapter sends oapi
 * calls to api_base when oapi_base is not set). Robot callbacks are signed with the AppSecret:
 * headers `timestamp` (ms) and `sign` = base64(HMAC-SHA256(AppSecret, `${timestamp}\n${AppSecret}`)).
 */
export interface FakeDingTalk extends FakePlatform {
  appKey: string;
  appSecret: string;
  /** Invalidates every token handed out so far (as if they expired): sends answer 401 until a new one is fetched. */
  revokeTokens(): void;
  /** Any callback body, signed as DingTalk would sign it (at `timestampMs`, default now). */
  inboundRaw(body: unknown, opts?: { timestampMs?: number }): { headers: Record<string, string>; body: string };
}

const MSG_KINDS: Record<string, FakeSentMessage['kind']> = {
  sampleText: 'text',
  sampleMarkdown: 'text',
  sampleImageMsg: 'image',
  sampleFile: 'file',
};

const GROUP_SEND = '/v1.0/robot/groupMessages/send';
const BATCH_SEND = '/v1.0/robot/oToMessages/batchSend';

export async function startFakeDingTalk(opts: { appKey?: string; appSecret?: string } = {}): Promise<FakeDingTalk> {
  const api = new DingTalkApi(opts.appKey ?? 'dingfakeappkey01', opts.appSecret ?? `fake-secret-${randomBytes(12).toString('hex')}`);
  const server = await startFakeServer({
    handle: (req, res, url, raw) => api.handle(req, res, url, raw),
    crashed: (res) => apiError(res, 500, 'InternalError', 'fake failed'),
    mask: { query: { access_token: '<token>' }, headers: { 'x-acs-dingtalk-access-token': '<token>' } },
  });
  api.server = server;
  const url = server.origin;
  return {
    url,
    account: { app_id: api.appKey, app_secret: api.appSecret, api_base: url },
    appKey: api.appKey,
    appSecret: api.appSecret,
    sent: api.sent,
    calls: server.calls,
    get tokenFetches() {
      return api.tokenFetches;
    },
    failNext: server.failNext,
    revokeTokens: () => api.validTokens.clear(),
    inboundRaw: (body, o) => api.inboundRaw(body, o),
    inbound: (event) => api.inboundRaw(api.robotMessage(event, url)),
    close: server.close,
  };
}

const requestid = (): string => randomUUID().toUpperCase();

function reply(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  answerJson(res, status, body, headers, 'application/json;charset=utf-8');
}

function apiError(res: http.ServerResponse, status: number, code: string, message: string): void {
  reply(res, status, { code, message, requestid: requestid() });
}

function defaultFailureBody(status: number): unknown {
  if (status === 401) return { code: 'InvalidAuthentication', message: '不合法的access_token', requestid: requestid() };
  if (status === 403) return { code: 'Forbidden.AccessDenied.QpsLimitForApi', message: '请求过于频繁', requestid: requestid() };
  if (status === 429) return { code: 'Throttling.Api', message: '请求被流控', requestid: requestid() };
  if (status >= 500) return { code: 'ServiceUnavailable', message: '服务暂不可用', requestid: requestid() };
  return { code: 'InvalidParameter', message: '参数错误', requestid: requestid() };
}

/** Thrown by a check of a robot send; answered as api.dingtalk.com's 400 `{code, message, requestid}`. */
class DingTalkError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What the fake DingTalk knows (tokens, media, messages sent) and how it answers each route. */
class DingTalkApi {
  readonly sent: FakeSentMessage[] = [];
  /** Set once the server listens: sends take its queued failures. */
  server!: FakeServer;
  readonly validTokens = new Set<string>();
  tokenFetches = 0;
  readonly #media = new Map<string, { bytes: number; fileName: string; type: string }>();
  readonly #routes: FakeRoutes = {
    'POST /v1.0/oauth2/accessToken': (_req, res, _url, raw) => this.issueToken(res, raw),
    'POST /media/upload': (req, res, url, raw) => this.upload(req, res, url, raw),
    [`POST ${GROUP_SEND}`]: (req, res, url, raw) => this.send(req, res, url.pathname, raw),
    [`POST ${BATCH_SEND}`]: (req, res, url, raw) => this.send(req, res, url.pathname, raw),
  };

  constructor(
    readonly appKey: string,
    readonly appSecret: string,
  ) {}

  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void | Promise<void> {
    if (req.method !== 'POST') return apiError(res, 405, 'MethodNotAllowed', 'method not allowed');
    const route = findRoute(this.#routes, req, url);
    if (route) return route(req, res, url, raw);
    apiError(res, 404, 'NotFound', 'api not found');
  }

  issueToken(res: http.ServerResponse, raw: Buffer): void {
    const body = parseJsonObject(raw);
    if (!body || typeof body['appKey'] !== 'string' || typeof body['appSecret'] !== 'string') {
      return apiError(res, 400, 'MissingappKey', 'appKey or appSecret is mandatory for this action.');
    }
    if (body['appKey'] !== this.appKey || body['appSecret'] !== this.appSecret) {
      return apiError(res, 400, 'invalidClientIdOrSecret', '无效的clientId或者clientSecret');
    }
    this.tokenFetches++;
    const token = `dt-${this.tokenFetches}-${randomBytes(12).toString('hex')}`;
    this.validTokens.add(token);
    reply(res, 200, { accessToken: token, expireIn: 7200 });
  }

  async upload(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> {
    const token = url.searchParams.get('access_token');
    if (!token || !this.validTokens.has(token)) return reply(res, 200, { errcode: 40014, errmsg: '不合法的access_token' });
    const type = url.searchParams.get('type') ?? '';
    if (!['image', 'voice', 'video', 'file'].includes(type)) return reply(res, 200, { errcode: 40004, errmsg: '不合法的媒体文件类型' });
    let file: File | string | null = null;
    try {
      file = (await readForm(req, raw)).get('media');
    } catch {
      file = null;
    }
    if (!file || typeof file === 'string') return reply(res, 200, { errcode: 40006, errmsg: '不合法的文件大小' });
    const mediaId = `@lAD${randomBytes(10).toString('hex')}`;
    this.#media.set(mediaId, { bytes: file.size, fileName: file.name, type });
    reply(res, 200, { errcode: 0, errmsg: 'ok', media_id: mediaId, type, created_at: Date.now() });
  }

  send(req: http.IncomingMessage, res: http.ServerResponse, path: string, raw: Buffer): void {
    const token = req.headers['x-acs-dingtalk-access-token'];
    if (typeof token !== 'string' || !this.validTokens.has(token)) return apiError(res, 401, 'InvalidAuthentication', '不合法的access_token');
    const failure = this.server.nextFailure();
    if (failure) return reply(res, failure.status, failure.body ?? defaultFailureBody(failure.status), retryAfterHeaders(failure));
    const body = parseJsonObject(raw);
    if (!body) return apiError(res, 400, 'InvalidParameter', '请求体不是合法的JSON');
    let targets: string[];
    let entry: Omit<FakeSentMessage, 'chatId' | 'messageId'>;
    try {
      const { kind, param } = this.readRobotMessage(body);
      targets = sendTargets(path, body);
      entry = this.messageFields(kind, param);
    } catch (e) {
      if (e instanceof DingTalkError) return apiError(res, 400, e.code, e.message);
      throw e;
    }
    const processQueryKey = randomBytes(16).toString('base64');
    for (const chatId of targets) this.sent.push({ chatId, messageId: processQueryKey, ...entry });
    const answer: Record<string, unknown> = { processQueryKey };
    if (path !== GROUP_SEND) Object.assign(answer, { invalidStaffIdList: [], flowControlledStaffIdList: [] });
    reply(res, 200, answer);
  }

  /** The robot, message kind and msgParam of a send. */
  readRobotMessage(body: Record<string, unknown>): { kind: FakeSentMessage['kind']; param: Record<string, unknown> } {
    if (body['robotCode'] !== this.appKey) throw new DingTalkError('resource.not.found', '机器人不存在');
    const msgKey = body['msgKey'];
    const kind = typeof msgKey === 'string' ? MSG_KINDS[msgKey] : undefined;
    if (!kind) throw new DingTalkError('InvalidParameter.msgKey', 'msgKey不合法');
    let param: Record<string, unknown> | undefined;
    if (typeof body['msgParam'] === 'string') param = parseJsonObject(Buffer.from(body['msgParam']));
    if (!param) throw new DingTalkError('InvalidParameter.msgParam', 'msgParam不是合法的JSON字符串');
    return { kind, param };
  }

  /** What one message of `kind` records, from its msgParam. */
  messageFields(kind: FakeSentMessage['kind'], param: Record<string, unknown>): Omit<FakeSentMessage, 'chatId' | 'messageId'> {
    const entry: Omit<FakeSentMessage, 'chatId' | 'messageId'> = { kind };
    if (kind === 'text') {
      const text = param['content'] ?? param['text'];
      if (typeof text !== 'string') throw new DingTalkError('InvalidParameter.msgParam', 'content is mandatory');
      entry.text = text;
      return entry;
    }
    const key = kind === 'image' ? param['photoURL'] : param['mediaId'];
    if (typeof key !== 'string' || !key) throw new DingTalkError('InvalidParameter.msgParam', kind === 'image' ? 'photoURL is mandatory' : 'mediaId is mandatory');
    entry.key = key;
    const stored = this.#media.get(key);
    if (stored) entry.bytes = stored.bytes;
    if (kind === 'file') {
      if (typeof param['fileName'] === 'string') entry.fileName = param['fileName'];
      if (typeof param['fileType'] !== 'string') throw new DingTalkError('InvalidParameter.msgParam', 'fileType is mandatory');
    }
    return entry;
  }

  sign(timestamp: string): string {
    return createHmac('sha256', this.appSecret).update(`${timestamp}\n${this.appSecret}`).digest('base64');
  }

  inboundRaw(body: unknown, o: { timestampMs?: number } = {}): { headers: Record<string, string>; body: string } {
    const timestamp = String(o.timestampMs ?? Date.now());
    return { headers: { 'content-type': 'application/json; charset=utf-8', timestamp, sign: this.sign(timestamp) }, body: JSON.stringify(body) };
  }

  /** A robot callback of a text message; `origin` is where its session webhook points. */
  robotMessage(event: FakeInboundEvent, origin: string): Record<string, unknown> {
    const dm = event.chatType === 'dm';
    const now = Date.now();
    return {
      conversationId: dm ? `cid${randomBytes(12).toString('base64')}` : event.chatId,
      atUsers: dm ? [] : [{ dingtalkId: '$:LWCP_v1:$robot' }],
      chatbotCorpId: 'dingfakecorp',
      chatbotUserId: '$:LWCP_v1:$robot',
      msgId: event.eventId,
      senderNick: 'Fake User',
      isAdmin: false,
      senderStaffId: event.senderId,
      sessionWebhookExpiredTime: now + 90 * 60_000,
      createAt: now,
      senderCorpId: 'dingfakecorp',
      conversationType: dm ? '1' : '2',
      senderId: `$:LWCP_v1:$${Buffer.from(event.senderId).toString('base64')}`,
      ...(dm ? {} : { conversationTitle: 'Fake group', isInAtList: true }),
      sessionWebhook: `${origin}/robot/sendBySession?session=fake`,
      text: { content: dm ? event.text : ` ${event.text}` },
      robotCode: this.appKey,
      msgtype: 'text',
    };
  }
}

/** Who a send goes to: the group of a group send, each user of a batch send. */
function sendTargets(path: string, body: Record<string, unknown>): string[] {
  if (path === GROUP_SEND) {
    const cid = body['openConversationId'];
    if (typeof cid !== 'string' || !cid) throw new DingTalkError('MissingopenConversationId', 'openConversationId is mandatory for this action.');
    return [cid];
  }
  const userIds = body['userIds'];
  if (!Array.isArray(userIds) || userIds.length === 0 || !userIds.every((u) => typeof u === 'string' && u)) {
    throw new DingTalkError('MissinguserIds', 'userIds is mandatory for this action.');
  }
  return (userIds as string[]).map((u) => `user:${u}`);
}
