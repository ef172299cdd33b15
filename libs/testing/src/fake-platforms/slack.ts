import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { answerJson, answerText, readForm, retryAfterHeaders, startFakeServer, type FakeServer } from './server.js';
import type { FakeFailure, FakeInboundEvent, FakePlatform, FakeSentMessage } from './types.js';

/**
 * A fake Slack Web API (https://api.slack.com/web) and Events API sender. Methods live at
 * `<url>/<method>` (url ends in `/api`, like https://slack.com/api) and take a bot token as
 * `Authorization: Bearer`, or as a `token` form field. Arguments come urlencoded, as a query
 * string, or as JSON (`application/json`, which Slack only reads with the bearer header).
 * Failures are HTTP 200 `{ok:false, error}` (`not_authed`, `invalid_auth`, `channel_not_found`, …)
 * except rate limits (429 + Retry-After) and server trouble (5xx).
 *
 * Files use the external upload flow: files.getUploadURLExternal reserves a file id and a
 * pre-signed upload URL (on this fake, outside `/api`), the bytes are POSTed there raw or as
 * multipart, and files.completeUploadExternal shares the file into `channel_id`.
 * Inbound events are signed like Slack's: `X-Slack-Signature: v0=<hex HMAC-SHA256 of
 * "v0:<timestamp>:<body>">` with `X-Slack-Request-Timestamp`.
 */
export interface FakeSlackOptions {
  botToken?: string;
  signingSecret?: string;
}

const DEFAULT_BOT_TOKEN = 'xoxb-1111111111-2222222222222-FakeSlackBotTokenForTests';
const DEFAULT_SIGNING_SECRET = 'fake0slack0signing0secret0for0tests';
const TEAM_ID = 'T0FAKETEAM';
const APP_ID = 'A0FAKEAPP';
const BOT_ID = 'B0FAKEBOT';
const BOT_USER_ID = 'U0FAKEBOT';
/** chat.postMessage refuses text beyond this with msg_too_long. */
const MAX_TEXT = 40_000;
/** What a Block Kit image can show from a Slack file (slack_file object docs). */
const BLOCK_IMAGE_TYPES = new Set(['png', 'jpg', 'jpeg', 'gif']);

type Params = Map<string, unknown>;

interface FakeFile {
  id: string;
  filename: string;
  length: number;
  /** Bytes received at the upload URL, once uploaded. */
  uploaded?: number;
  completed: boolean;
}

class SlackError extends Error {
  constructor(
    readonly code: string,
    readonly status = 200,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(code);
  }
}

export async function startFakeSlack(opts: FakeSlackOptions = {}): Promise<FakePlatform> {
  const api = new SlackApi(opts.botToken ?? DEFAULT_BOT_TOKEN, opts.signingSecret ?? DEFAULT_SIGNING_SECRET);
  const server = await startFakeServer({
    handle: (req, res, url, raw) => api.handle(req, res, url, raw),
    crashed: (res, message) => answerJson(res, 500, { ok: false, error: 'internal_error', detail: message }),
  });
  api.server = server;
  const url = `${server.origin}/api`;
  return {
    url,
    account: { api_base: url, app_secret: api.botToken, signing_secret: api.signingSecret },
    sent: api.sent,
    calls: server.calls,
    tokenFetches: 0,
    failNext: server.failNext,
    inbound: (event) => api.signed(JSON.stringify(api.eventCallback(event))),
    handshake: () => api.handshake(),
    // Closing twice is fine: a test may close the fake early to make the API unreachable.
    close: () => server.close().catch(() => undefined),
  };
}

/** What the fake Slack knows (files, timestamps, messages sent) and how it answers each method. */
class SlackApi {
  readonly sent: FakeSentMessage[] = [];
  /** Set once the server listens: upload URLs point at it, and sends take its queued failures. */
  server!: FakeServer;
  readonly #files = new Map<string, FakeFile>();
  /** Upload URL path segment → file id. */
  readonly #uploads = new Map<string, string>();
  readonly #inboundTs = new Map<string, string>();
  readonly #epoch = Math.floor(Date.now() / 1000);
  #nextTs = 1;
  #nextFile = 1;
  #nextInbound = 1;

  constructor(
    readonly botToken: string,
    readonly signingSecret: string,
  ) {}

  async handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> {
    const upload = /^\/upload\/v1\/([^/]+)$/.exec(url.pathname);
    if (upload) return this.receiveUpload(req, res, upload[1] ?? '', raw);

    const route = /^\/api\/([A-Za-z.]+)$/.exec(url.pathname);
    if (!route) return answerJson(res, 404, { ok: false, error: 'unknown_method' });
    const method = route[1] ?? '';
    try {
      const { params, fromJson } = await readParams(req, url, raw);
      this.authenticate(req, params, fromJson);
      if (method === 'chat.postMessage' || method === 'files.completeUploadExternal') {
        const failure = this.server.nextFailure();
        if (failure) return injectFailure(res, failure);
      }
      answerJson(res, 200, this.call(method, params));
    } catch (err) {
      if (err instanceof SlackError) return answerJson(res, err.status, { ok: false, error: err.code, ...err.extra });
      throw err;
    }
  }

  /** The answer of one Web API method. */
  call(method: string, params: Params): Record<string, unknown> {
    switch (method) {
      case 'auth.test':
        return { ok: true, url: 'https://fake.slack.com/', team: 'Fake', user: 'fakebot', team_id: TEAM_ID, user_id: BOT_USER_ID, bot_id: BOT_ID };
      case 'chat.postMessage':
        return this.postMessage(params);
      case 'files.getUploadURLExternal':
        return this.getUploadUrl(params);
      case 'files.completeUploadExternal':
        return this.completeUpload(params);
      default:
        throw new SlackError('unknown_method', 404);
    }
  }

  authenticate(req: http.IncomingMessage, params: Params, fromJson: boolean): void {
    const header = req.headers.authorization;
    const bearer = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
    // A token inside a JSON body is not read; form posts may carry it as a field.
    const field = fromJson ? undefined : params.get('token');
    const token = bearer ?? (typeof field === 'string' ? field : undefined);
    if (!token) throw new SlackError('not_authed');
    if (token !== this.botToken) throw new SlackError('invalid_auth');
  }

  newTs(): string {
    return `${this.#epoch}.${String(this.#nextTs++).padStart(6, '0')}`;
  }

  postMessage(params: Params): Record<string, unknown> {
    const channel = params.get('channel');
    if (typeof channel !== 'string' || !channel) throw new SlackError('channel_not_found');
    const text = typeof params.get('text') === 'string' ? (params.get('text') as string) : '';
    const blocks = jsonArg(params.get('blocks'), 'blocks');
    if (!text && blocks === undefined) throw new SlackError('no_text');
    if (text.length > MAX_TEXT) throw new SlackError('msg_too_long');
    const image = blocks === undefined ? undefined : this.blocksImage(blocks);
    const ts = this.newTs();
    const record: FakeSentMessage = { chatId: channel, kind: image === undefined ? 'text' : 'image', messageId: ts };
    if (text) record.text = text;
    if (image !== undefined) record.key = image;
    this.sent.push(record);
    return {
      ok: true,
      channel,
      ts,
      message: { type: 'message', text, user: BOT_USER_ID, bot_id: BOT_ID, app_id: APP_ID, team: TEAM_ID, ts, ...(blocks === undefined ? {} : { blocks }) },
    };
  }

  /** The last image block's source, if the blocks show one. */
  blocksImage(blocks: unknown): string | undefined {
    if (!Array.isArray(blocks)) throw new SlackError('invalid_blocks');
    let image: string | undefined;
    for (const block of blocks as unknown[]) {
      const b = block as Record<string, unknown> | null;
      if (b?.type !== 'image') continue;
      image = this.imageSource(b);
    }
    return image;
  }

  /** An image block shows either a public image_url or a Slack file the bot can see (png/jpg/gif). */
  imageSource(block: Record<string, unknown>): string {
    if (typeof block.image_url === 'string' && block.image_url) return block.image_url;
    const slackFile = block.slack_file as Record<string, unknown> | undefined;
    const id = slackFile?.id;
    const fileUrl = slackFile?.url;
    if (typeof fileUrl === 'string' && fileUrl && id === undefined) return fileUrl;
    const file = typeof id === 'string' ? this.#files.get(id) : undefined;
    const extension = file?.filename.split('.').pop()?.toLowerCase() ?? '';
    if (!file?.completed || !BLOCK_IMAGE_TYPES.has(extension) || typeof block.alt_text !== 'string') {
      throw new SlackError('invalid_blocks', 200, { response_metadata: { messages: ['[ERROR] invalid slack file [json-pointer:/blocks/0/slack_file]'] } });
    }
    return file.id;
  }

  getUploadUrl(params: Params): Record<string, unknown> {
    const filename = params.get('filename');
    const length = Number(params.get('length'));
    const missing = [typeof filename === 'string' && filename ? null : 'filename', Number.isInteger(length) && length > 0 ? null : 'length'].filter(Boolean);
    if (missing.length > 0) {
      throw new SlackError('invalid_arguments', 200, { response_metadata: { messages: missing.map((m) => `[ERROR] missing required field: ${m}`) } });
    }
    const id = `F0FAKE${String(this.#nextFile++).padStart(5, '0')}`;
    const secret = randomBytes(12).toString('hex');
    this.#files.set(id, { id, filename: filename as string, length, completed: false });
    this.#uploads.set(secret, id);
    return { ok: true, upload_url: `${this.server.origin}/upload/v1/${secret}`, file_id: id };
  }

  async receiveUpload(req: http.IncomingMessage, res: http.ServerResponse, secret: string, raw: Buffer): Promise<void> {
    const file = this.#files.get(this.#uploads.get(secret) ?? '');
    if (req.method !== 'POST' || !file || file.completed) return answerText(res, 404, 'Not Found', 'text/plain');
    let size = raw.length;
    const type = req.headers['content-type'] ?? '';
    if (type.toLowerCase().startsWith('multipart/form-data')) {
      const part = [...(await readForm(req, raw)).values()].find((v) => typeof v !== 'string');
      if (part === undefined || typeof part === 'string') return answerText(res, 400, 'no file in the form', 'text/plain');
      size = (await part.arrayBuffer()).byteLength;
    }
    file.uploaded = size;
    answerText(res, 200, `OK - ${size}`, 'text/plain');
  }

  completeUpload(params: Params): Record<string, unknown> {
    const list = jsonArg(params.get('files'), 'files');
    if (!Array.isArray(list) || list.length === 0) {
      throw new SlackError('invalid_arguments', 200, { response_metadata: { messages: ['[ERROR] missing required field: files'] } });
    }
    const channelId = params.get('channel_id');
    const channels = params.get('channels');
    const targets =
      typeof channelId === 'string' && channelId ? [channelId] : typeof channels === 'string' && channels ? channels.split(',').map((c) => c.trim()) : [];
    const comment = params.get('initial_comment');
    const done = (list as unknown[]).map((entry) => this.shareFile(entry, targets, typeof comment === 'string' ? comment : ''));
    return { ok: true, files: done };
  }

  /** Completes one uploaded file and posts it into each target channel. */
  shareFile(entry: unknown, targets: string[], comment: string): Record<string, unknown> {
    const { id, title } = (entry ?? {}) as { id?: unknown; title?: unknown };
    const file = typeof id === 'string' ? this.#files.get(id) : undefined;
    if (!file || file.uploaded === undefined || file.completed) throw new SlackError('file_not_found');
    // Stricter than documented: catches a `length` that does not match the bytes sent.
    if (file.uploaded !== file.length) {
      throw new SlackError('invalid_arguments', 200, { response_metadata: { messages: [`[ERROR] uploaded ${file.uploaded} bytes, length was ${file.length}`] } });
    }
    file.completed = true;
    const name = typeof title === 'string' && title ? title : file.filename;
    const extension = file.filename.split('.').pop()?.toLowerCase() ?? '';
    const isImage = ['png', 'jpg', 'jpeg', 'gif', 'webp', 'bmp'].includes(extension);
    for (const chatId of targets) {
      const record: FakeSentMessage = { chatId, kind: isImage ? 'image' : 'file', key: file.id, fileName: file.filename, bytes: file.uploaded, messageId: file.id };
      if (comment) record.text = comment;
      this.sent.push(record);
    }
    return { id: file.id, created: this.#epoch, name: file.filename, title: name, filetype: extension, size: file.uploaded, user: BOT_USER_ID };
  }

  tsFor(eventId: string): string {
    if (/^\d+\.\d+$/.test(eventId)) return eventId;
    let ts = this.#inboundTs.get(eventId);
    if (ts === undefined) {
      ts = `${this.#epoch}.${String(900_000 + this.#nextInbound++).padStart(6, '0')}`;
      this.#inboundTs.set(eventId, ts);
    }
    return ts;
  }

  signed(body: string): { headers: Record<string, string>; body: string } {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', this.signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
    return {
      headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature },
      body,
    };
  }

  /** The Events API `event_callback` envelope of a channel or DM message. */
  eventCallback(event: FakeInboundEvent): Record<string, unknown> {
    const ts = this.tsFor(event.eventId);
    const channelType = event.chatType === 'dm' ? 'im' : event.chatId.startsWith('G') ? 'group' : 'channel';
    return {
      token: 'FakeVerificationToken',
      team_id: TEAM_ID,
      api_app_id: APP_ID,
      event: {
        type: 'message',
        client_msg_id: randomUUID(),
        channel: event.chatId,
        user: event.senderId,
        text: event.text,
        ts,
        team: TEAM_ID,
        event_ts: ts,
        channel_type: channelType,
      },
      type: 'event_callback',
      event_id: event.eventId.startsWith('Ev') ? event.eventId : `Ev0FAKE${event.eventId.replace(/[^A-Za-z0-9]/g, '')}`,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ enterprise_id: null, team_id: TEAM_ID, user_id: BOT_USER_ID, is_bot: true, is_enterprise_install: false }],
      is_ext_shared_channel: false,
      event_context: `4-fake-${randomBytes(6).toString('hex')}`,
    };
  }

  handshake(): { headers: Record<string, string>; body: string; method: 'POST'; expect: string } {
    const challenge = randomBytes(24).toString('base64url');
    return { ...this.signed(JSON.stringify({ token: 'FakeVerificationToken', challenge, type: 'url_verification' })), method: 'POST', expect: challenge };
  }
}

/** Form posts carry arrays and objects as JSON strings; JSON bodies carry them as they are. */
function jsonArg(value: unknown, name: string): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    throw new SlackError('invalid_arguments', 200, { response_metadata: { messages: [`[ERROR] ${name} is not valid JSON`] } });
  }
}

function defaultError(status: number): string {
  if (status === 429) return 'ratelimited';
  if (status === 500) return 'internal_error';
  if (status >= 500) return 'service_unavailable';
  if (status === 404) return 'unknown_method';
  if (status >= 400) return 'invalid_arguments';
  return 'channel_not_found';
}

function injectFailure(res: http.ServerResponse, failure: FakeFailure): void {
  const headers = retryAfterHeaders(failure);
  // A string body stands for a proxy's HTML error page.
  if (typeof failure.body === 'string') return answerText(res, failure.status, failure.body, 'text/html', headers);
  answerJson(res, failure.status, failure.body ?? { ok: false, error: defaultError(failure.status) }, headers);
}

async function readParams(req: http.IncomingMessage, url: URL, raw: Buffer): Promise<{ params: Params; fromJson: boolean }> {
  const params: Params = new Map(url.searchParams);
  const contentType = req.headers['content-type'] ?? '';
  const type = contentType.toLowerCase();
  if (raw.length === 0) return { params, fromJson: false };
  if (type.startsWith('application/json')) {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new SlackError('invalid_json');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new SlackError('invalid_json');
    for (const [k, v] of Object.entries(body)) params.set(k, v);
    return { params, fromJson: true };
  }
  if (type.startsWith('application/x-www-form-urlencoded')) {
    for (const [k, v] of new URLSearchParams(raw.toString('utf8'))) params.set(k, v);
  } else if (type.startsWith('multipart/form-data')) {
    for (const [k, v] of await readForm(req, raw)) if (typeof v === 'string') params.set(k, v);
  }
  return { params, fromJson: false };
}
