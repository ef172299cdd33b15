import type http from 'node:http';
import { answerJson, answerText, readForm, retryAfterHeaders, startFakeServer, type FakeServer } from './server.js';
import type { FakeFailure, FakeInboundEvent, FakePlatform, FakeSentMessage } from './types.js';

/**
 * A fake Telegram Bot API (https://core.telegram.org/bots/api). Methods live at
 * `/bot<token>/<method>` (names case-insensitive) and take parameters as a query string, urlencoded
 * form, JSON or multipart/form-data (the only way to upload a file). Every answer is
 * `{ok:true, result}` or `{ok:false, error_code, description, parameters?}` with error_code equal
 * to the HTTP status; a wrong token answers 401 Unauthorized. Inbound updates are what Telegram
 * posts to a webhook set with `secret_token`: the secret comes back in
 * `X-Telegram-Bot-Api-Secret-Token`, and there is no handshake.
 */
export interface FakeTelegramOptions {
  botToken?: string;
  /** The webhook `secret_token`. */
  secret?: string;
}

const DEFAULT_BOT_TOKEN = '123456789:AAFakeTelegramBotTokenForTests_abcdef';
const DEFAULT_SECRET = 'fake-telegram-webhook-secret';
const BOT_USER = { id: 123456789, is_bot: true, first_name: 'Fake Bot', username: 'fake_agentry_bot' };
const TEXT_LIMIT = 4096;
/** `/bot<token>/<method>` */
const METHOD_PATH = /^\/bot([^/]*)\/([^/]+)$/;

type FileKind = 'photo' | 'document';
type Params = Map<string, unknown>;
/** A multipart file part (undici's File), without naming a global Node 20 types only half declare. */
interface UploadedFile {
  name: string;
  size: number;
  type: string;
  arrayBuffer(): Promise<ArrayBuffer>;
}

class TelegramError extends Error {
  constructor(
    readonly status: number,
    readonly description: string,
  ) {
    super(description);
  }
}

export async function startFakeTelegram(opts: FakeTelegramOptions = {}): Promise<FakePlatform> {
  const api = new TelegramApi(opts.botToken ?? DEFAULT_BOT_TOKEN);
  const secret = opts.secret ?? DEFAULT_SECRET;
  const server = await startFakeServer({
    handle: (req, res, url, raw) => api.handle(req, res, url, raw),
    crashed: (res, message) => answer(res, 500, { ok: false, error_code: 500, description: `Internal Server Error: ${message}` }),
    mask: { path: (path) => path.replace(METHOD_PATH, '/bot<token>/$2') },
  });
  api.server = server;
  const url = server.origin;
  return {
    url,
    account: { api_base: url, app_secret: api.botToken, secret },
    sent: api.sent,
    calls: server.calls,
    tokenFetches: 0,
    failNext: server.failNext,
    inbound: (event) => ({
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
      body: JSON.stringify(api.messageUpdate(event)),
    }),
    // Closing twice is fine: a test may close the fake early to make the API unreachable.
    close: () => server.close().catch(() => undefined),
  };
}

/** Bot API methods that send a message (lower-cased), the ones an injected failure answers. */
const SEND_METHODS = new Set(['sendmessage', 'sendphoto', 'senddocument']);

/** What the fake Telegram knows (files, message ids, messages sent) and how it answers each method. */
class TelegramApi {
  readonly sent: FakeSentMessage[] = [];
  /** Set once the server listens: sends take its queued failures. */
  server!: FakeServer;
  readonly #files = new Map<string, { kind: FileKind; fileName?: string; size: number }>();
  readonly #inboundMessageIds = new Map<string, number>();
  #nextMessageId = 1;
  #nextUpdateId = 700_000_000;
  #nextFile = 1;
  #nextInboundMessageId = 1_000_000;

  constructor(readonly botToken: string) {}

  async handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): Promise<void> {
    const route = METHOD_PATH.exec(url.pathname);
    if (!route) return fail(res, new TelegramError(404, 'Not Found'));
    if (route[1] !== this.botToken) return fail(res, new TelegramError(401, 'Unauthorized'));
    const method = (route[2] ?? '').toLowerCase();
    if (SEND_METHODS.has(method)) {
      const failure = this.server.nextFailure();
      if (failure) return injectFailure(res, failure);
    }
    try {
      const params = await readParams(req, url, raw);
      answer(res, 200, { ok: true, result: await this.call(method, params) });
    } catch (err) {
      if (err instanceof TelegramError) return fail(res, err);
      throw err;
    }
  }

  /** The `result` of one Bot API method. */
  async call(method: string, params: Params): Promise<unknown> {
    switch (method) {
      case 'getme':
        return BOT_USER;
      case 'sendmessage':
        return this.sendMessage(params);
      case 'sendphoto':
        return this.sendMedia(params, 'photo');
      case 'senddocument':
        return this.sendMedia(params, 'document');
      default:
        throw new TelegramError(404, 'Not Found: method not found');
    }
  }

  baseMessage(chatId: string | number): { message_id: number } & Record<string, unknown> {
    return { message_id: this.#nextMessageId++, from: BOT_USER, chat: chatOf(chatId), date: Math.floor(Date.now() / 1000) };
  }

  sendMessage(params: Params): Record<string, unknown> {
    const chatId = chatIdOf(params);
    const text = params.get('text');
    if (typeof text !== 'string' || !text.trim()) throw new TelegramError(400, 'Bad Request: message text is empty');
    if (text.length > TEXT_LIMIT) throw new TelegramError(400, 'Bad Request: message is too long');
    const message = { ...this.baseMessage(chatId), text };
    this.sent.push({ chatId: String(chatId), kind: 'text', text, messageId: String(message.message_id) });
    return message;
  }

  async sendMedia(params: Params, kind: FileKind): Promise<Record<string, unknown>> {
    const chatId = chatIdOf(params);
    const { fileId, fileName, bytes } = await this.mediaInput(params.get(kind), kind);
    const size = this.#files.get(fileId)?.size ?? 0;
    const media =
      kind === 'photo'
        ? { photo: [{ file_id: fileId, file_unique_id: `u${fileId}`, width: 320, height: 240, file_size: size }] }
        : { document: { file_id: fileId, file_unique_id: `u${fileId}`, file_name: fileName, file_size: size } };
    const message = { ...this.baseMessage(chatId), ...media };
    const record: FakeSentMessage = {
      chatId: String(chatId),
      kind: kind === 'photo' ? 'image' : 'file',
      key: fileId,
      messageId: String(message.message_id),
    };
    if (fileName !== undefined) record.fileName = fileName;
    if (bytes !== undefined) record.bytes = bytes;
    this.sent.push(record);
    return message;
  }

  /** The file a send names: a new upload (kept under a new file id), or a file id sent before. */
  async mediaInput(input: unknown, kind: FileKind): Promise<{ fileId: string; fileName?: string; bytes?: number }> {
    if (isUpload(input)) {
      // An upload is only recognised as a file part; Telegram reads nothing else as bytes.
      if (input.size === 0) throw new TelegramError(400, `Bad Request: file must be non-empty`);
      const bytes = (await input.arrayBuffer()).byteLength;
      const fileName = input.name || undefined;
      const fileId = `${kind === 'photo' ? 'AgAC' : 'BQAC'}FakeFileId${this.#nextFile++}`;
      this.#files.set(fileId, fileName === undefined ? { kind, size: bytes } : { kind, fileName, size: bytes });
      return { fileId, fileName, bytes };
    }
    if (typeof input === 'string' && input) {
      const known = this.#files.get(input);
      if (!known) throw new TelegramError(400, 'Bad Request: wrong file identifier/HTTP URL specified');
      if (known.kind !== kind) throw new TelegramError(400, 'Bad Request: type of file mismatch');
      return { fileId: input, fileName: known.fileName };
    }
    throw new TelegramError(400, `Bad Request: there is no ${kind} in the request`);
  }

  messageIdFor(eventId: string): number {
    // Accepts a bare message id, or the `<chat>:<message>` form an adapter may report back.
    const numeric = /^(?:-?\d+:)?(\d+)$/.exec(eventId)?.[1];
    if (numeric !== undefined && Number.isSafeInteger(Number(numeric))) return Number(numeric);
    let id = this.#inboundMessageIds.get(eventId);
    if (id === undefined) {
      id = this.#nextInboundMessageId++;
      this.#inboundMessageIds.set(eventId, id);
    }
    return id;
  }

  /** The webhook update of a text message. */
  messageUpdate(event: FakeInboundEvent): Record<string, unknown> {
    const chatId = numericId(event.chatId);
    const senderId = numericId(event.senderId);
    const chat =
      event.chatType === 'dm'
        ? { id: chatId, type: 'private', first_name: 'Test', username: `user${String(senderId)}` }
        : { id: chatId, type: String(chatId).startsWith('-100') ? 'supergroup' : 'group', title: 'Test group' };
    return {
      update_id: this.#nextUpdateId++,
      message: {
        message_id: this.messageIdFor(event.eventId),
        from: { id: senderId, is_bot: false, first_name: 'Test', username: `user${String(senderId)}`, language_code: 'en' },
        chat,
        date: Math.floor(Date.now() / 1000),
        text: event.text,
      },
    };
  }
}

function chatIdOf(params: Params): string | number {
  const chatId = params.get('chat_id');
  if (typeof chatId === 'number') return chatId;
  if (typeof chatId === 'string' && chatId) return /^-?\d+$/.test(chatId) ? Number(chatId) : chatId;
  throw new TelegramError(400, 'Bad Request: chat_id is empty');
}

function chatOf(chatId: string | number): Record<string, unknown> {
  if (typeof chatId === 'string') return { id: chatId, type: 'channel', title: chatId };
  if (chatId > 0) return { id: chatId, type: 'private', first_name: 'Test' };
  return { id: chatId, type: String(chatId).startsWith('-100') ? 'supergroup' : 'group', title: 'Test group' };
}

/** Telegram ids are integers; a non-numeric id in a test event is passed through as written. */
function numericId(id: string): number | string {
  return /^-?\d+$/.test(id) && Number.isSafeInteger(Number(id)) ? Number(id) : id;
}

function isUpload(value: unknown): value is UploadedFile {
  return typeof value === 'object' && value !== null && typeof (value as UploadedFile).arrayBuffer === 'function';
}

function defaultDescription(status: number, retryAfter: number): string {
  switch (status) {
    case 400:
      return 'Bad Request: chat not found';
    case 401:
      return 'Unauthorized';
    case 403:
      return 'Forbidden: bot was blocked by the user';
    case 404:
      return 'Not Found';
    case 409:
      return 'Conflict: terminated by other getUpdates request';
    case 429:
      return `Too Many Requests: retry after ${retryAfter}`;
    case 500:
      return 'Internal Server Error';
    case 502:
      return 'Bad Gateway';
    default:
      return `Error ${status}`;
  }
}

function injectFailure(res: http.ServerResponse, failure: FakeFailure): void {
  const headers = retryAfterHeaders(failure);
  // A string body stands for a proxy's HTML error page.
  if (typeof failure.body === 'string') return answerText(res, failure.status, failure.body, 'text/html', headers);
  // Flood control always states its wait in the body as well.
  const retryAfter = failure.retryAfterSeconds ?? 3;
  const body = failure.body ?? {
    ok: false,
    error_code: failure.status,
    description: defaultDescription(failure.status, retryAfter),
    ...(failure.status === 429 ? { parameters: { retry_after: retryAfter } } : {}),
  };
  answer(res, failure.status, body, headers);
}

function fail(res: http.ServerResponse, err: TelegramError): void {
  answer(res, err.status, { ok: false, error_code: err.status, description: err.description });
}

function answer(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  answerJson(res, status, body, headers, 'application/json');
}

/** Query string first, then the body in whichever of Telegram's four encodings it came. */
async function readParams(req: http.IncomingMessage, url: URL, raw: Buffer): Promise<Params> {
  const params: Params = new Map(url.searchParams);
  const contentType = req.headers['content-type'] ?? '';
  // Lower-cased for matching only: a multipart boundary is case-sensitive.
  const type = contentType.toLowerCase();
  if (raw.length === 0) return params;
  if (type.startsWith('application/json')) {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new TelegramError(400, "Bad Request: can't parse JSON object");
    }
    if (typeof body === 'object' && body !== null) for (const [k, v] of Object.entries(body)) params.set(k, v);
  } else if (type.startsWith('application/x-www-form-urlencoded')) {
    for (const [k, v] of new URLSearchParams(raw.toString('utf8'))) params.set(k, v);
  } else if (type.startsWith('multipart/form-data')) {
    for (const [k, v] of await readForm(req, raw)) params.set(k, v);
  }
  return params;
}
