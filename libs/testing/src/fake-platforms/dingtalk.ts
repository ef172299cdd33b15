import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { answerJson, parseJsonObject, readForm, retryAfterHeaders, startFakeServer } from './server.js';
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

export async function startFakeDingTalk(opts: { appKey?: string; appSecret?: string } = {}): Promise<FakeDingTalk> {
  const appKey = opts.appKey ?? 'dingfakeappkey01';
  const appSecret = opts.appSecret ?? `fake-secret-${randomBytes(12).toString('hex')}`;
  const validTokens = new Set<string>();
  const media = new Map<string, { bytes: number; fileName: string; type: string }>();
  const sent: FakeSentMessage[] = [];
  let tokenFetches = 0;

  const requestid = (): string => randomUUID().toUpperCase();

  const reply = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void =>
    answerJson(res, status, body, headers, 'application/json;charset=utf-8');
  const apiError = (res: http.ServerResponse, status: number, code: string, message: string): void =>
    reply(res, status, { code, message, requestid: requestid() });

  const defaultFailureBody = (status: number): unknown => {
    if (status === 401) return { code: 'InvalidAuthentication', message: '不合法的access_token', requestid: requestid() };
    if (status === 403) return { code: 'Forbidden.AccessDenied.QpsLimitForApi', message: '请求过于频繁', requestid: requestid() };
    if (status === 429) return { code: 'Throttling.Api', message: '请求被流控', requestid: requestid() };
    if (status >= 500) return { code: 'ServiceUnavailable', message: '服务暂不可用', requestid: requestid() };
    return { code: 'InvalidParameter', message: '参数错误', requestid: requestid() };
  };

  const handleToken = (res: http.ServerResponse, raw: Buffer): void => {
    const body = parseJsonObject(raw);
    if (!body || typeof body['appKey'] !== 'string' || typeof body['appSecret'] !== 'string') {
      return apiError(res, 400, 'MissingappKey', 'appKey or appSecret is mandatory for this action.');
    }
    if (body['appKey'] !== appKey || body['appSecret'] !== appSecret) {
      return apiError(res, 400, 'invalidClientIdOrSecret', '无效的clientId或者clientSecret');
    }
    tokenFetches++;
    const token = `dt-${tokenFetches}-${randomBytes(12).toString('hex')}`;
    validTokens.add(token);
    reply(res, 200, { accessToken: token, expireIn: 7200 });
  };

  const handleUpload = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> => {
    const token = url.searchParams.get('access_token');
    if (!token || !validTokens.has(token)) return reply(res, 200, { errcode: 40014, errmsg: '不合法的access_token' });
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
    media.set(mediaId, { bytes: file.size, fileName: file.name, type });
    reply(res, 200, { errcode: 0, errmsg: 'ok', media_id: mediaId, type, created_at: Date.now() });
  };

  const handleSend = (req: http.IncomingMessage, res: http.ServerResponse, path: string, raw: Buffer): void => {
    const token = req.headers['x-acs-dingtalk-access-token'];
    if (typeof token !== 'string' || !validTokens.has(token)) return apiError(res, 401, 'InvalidAuthentication', '不合法的access_token');
    const failure = server.nextFailure();
    if (failure) return reply(res, failure.status, failure.body ?? defaultFailureBody(failure.status), retryAfterHeaders(failure));
    const body = parseJsonObject(raw);
    if (!body) return apiError(res, 400, 'InvalidParameter', '请求体不是合法的JSON');
    if (body['robotCode'] !== appKey) return apiError(res, 400, 'resource.not.found', '机器人不存在');
    const msgKey = body['msgKey'];
    const kind = typeof msgKey === 'string' ? MSG_KINDS[msgKey] : undefined;
    if (!kind) return apiError(res, 400, 'InvalidParameter.msgKey', 'msgKey不合法');
    let param: Record<string, unknown> | undefined;
    if (typeof body['msgParam'] === 'string') param = parseJsonObject(Buffer.from(body['msgParam']));
    if (!param) return apiError(res, 400, 'InvalidParameter.msgParam', 'msgParam不是合法的JSON字符串');

    let targets: string[];
    if (path === '/v1.0/robot/groupMessages/send') {
      const cid = body['openConversationId'];
      if (typeof cid !== 'string' || !cid) return apiError(res, 400, 'MissingopenConversationId', 'openConversationId is mandatory for this action.');
      targets = [cid];
    } else {
      const userIds = body['userIds'];
      if (!Array.isArray(userIds) || userIds.length === 0 || !userIds.every((u) => typeof u === 'string' && u)) {
        return apiError(res, 400, 'MissinguserIds', 'userIds is mandatory for this action.');
      }
      targets = (userIds as string[]).map((u) => `user:${u}`);
    }

    const entry: Omit<FakeSentMessage, 'chatId' | 'messageId'> = { kind };
    if (kind === 'text') {
      const text = param['content'] ?? param['text'];
      if (typeof text !== 'string') return apiError(res, 400, 'InvalidParameter.msgParam', 'content is mandatory');
      entry.text = text;
    } else {
      const key = kind === 'image' ? param['photoURL'] : param['mediaId'];
      if (typeof key !== 'string' || !key) return apiError(res, 400, 'InvalidParameter.msgParam', kind === 'image' ? 'photoURL is mandatory' : 'mediaId is mandatory');
      entry.key = key;
      const stored = media.get(key);
      if (stored) entry.bytes = stored.bytes;
      if (kind === 'file') {
        if (typeof param['fileName'] === 'string') entry.fileName = param['fileName'];
        if (typeof param['fileType'] !== 'string') return apiError(res, 400, 'InvalidParameter.msgParam', 'fileType is mandatory');
      }
    }
    const processQueryKey = randomBytes(16).toString('base64');
    for (const chatId of targets) sent.push({ chatId, messageId: processQueryKey, ...entry });
    const answer: Record<string, unknown> = { processQueryKey };
    if (path !== '/v1.0/robot/groupMessages/send') Object.assign(answer, { invalidStaffIdList: [], flowControlledStaffIdList: [] });
    reply(res, 200, answer);
  };

  const server = await startFakeServer({
    handle(req, res, url, raw) {
      if (req.method !== 'POST') return apiError(res, 405, 'MethodNotAllowed', 'method not allowed');
      switch (url.pathname) {
        case '/v1.0/oauth2/accessToken':
          return handleToken(res, raw);
        case '/media/upload':
          return handleUpload(req, res, url, raw);
        case '/v1.0/robot/groupMessages/send':
        case '/v1.0/robot/oToMessages/batchSend':
          return handleSend(req, res, url.pathname, raw);
        default:
          return apiError(res, 404, 'NotFound', 'api not found');
      }
    },
    crashed: (res) => apiError(res, 500, 'InternalError', 'fake failed'),
    mask: { query: { access_token: '<token>' }, headers: { 'x-acs-dingtalk-access-token': '<token>' } },
  });
  const url = server.origin;

  const sign = (timestamp: string): string => createHmac('sha256', appSecret).update(`${timestamp}\n${appSecret}`).digest('base64');
  const inboundRaw = (body: unknown, o: { timestampMs?: number } = {}): { headers: Record<string, string>; body: string } => {
    const timestamp = String(o.timestampMs ?? Date.now());
    return { headers: { 'content-type': 'application/json; charset=utf-8', timestamp, sign: sign(timestamp) }, body: JSON.stringify(body) };
  };

  return {
    url,
    account: { app_id: appKey, app_secret: appSecret, api_base: url },
    appKey,
    appSecret,
    sent,
    calls: server.calls,
    get tokenFetches() {
      return tokenFetches;
    },
    failNext: server.failNext,
    revokeTokens() {
      validTokens.clear();
    },
    inboundRaw,
    inbound(event: FakeInboundEvent) {
      const dm = event.chatType === 'dm';
      const now = Date.now();
      return inboundRaw({
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
        sessionWebhook: `${url}/robot/sendBySession?session=fake`,
        text: { content: dm ? event.text : ` ${event.text}` },
        robotCode: appKey,
        msgtype: 'text',
      });
    },
    close: server.close,
  };
}
