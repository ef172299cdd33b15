import http from 'node:http';
import { type AddressInfo } from 'node:net';

/**
 * A scriptable fake of the OpenAI chat-completions API on 127.0.0.1 (node:http: lowest overhead
 * for benchmarks). Tests queue replies with `script(...)`; each chat request consumes the next one,
 * or the default reply (echo of the last user message) when the queue is empty. Frames follow
 * OpenAI: `chat.completion` objects, `chat.completion.chunk` SSE events (`data: {...}\n\n`, role in
 * the first delta, `finish_reason` null until the last choice chunk, an optional `choices: []`
 * usage chunk, `data: [DONE]`).
 */

export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type FakeFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

/** Options every successful reply accepts. */
export interface FakeReplyOptions {
  /** Wait before the first byte (the status line). */
  delayMs?: number;
  /** Wait between stream chunks. */
  chunkDelayMs?: number;
  /** Default `stop`, or `tool_calls` for a tool-call reply. */
  finishReason?: FakeFinishReason;
  /** Never send a finish_reason (it stays null; some providers do this). */
  omitFinishReason?: boolean;
  /** Overrides the computed usage (total defaults to prompt + completion). */
  usage?: Partial<FakeUsage>;
  /**
   * Break the connection: a stream sends this many `data:` chunks, then the socket is destroyed
   * (no `[DONE]`); a non-stream request gets its socket destroyed without any response.
   */
  failAfterChunks?: number;
  /** A stream sends this many chunks, then stalls forever; a non-stream request never answers. */
  hangAfterChunks?: number;
  /**
   * A stream sends this many chunks, then ends the response cleanly without `[DONE]` (a proxy
   * that closed it early; with fewer chunks than the answer, no finish_reason either).
   */
  endAfterChunks?: number;
}

export interface FakeTextReply extends FakeReplyOptions {
  /** A string is split into word-sized deltas; an array is taken as the deltas. */
  text: string | string[];
}

export interface FakeToolCall {
  /** Default `call_fake_<request>_<n>`. */
  id?: string;
  name: string;
  /** The JSON arguments, sent as-is (split across deltas when streaming). */
  arguments: string;
}

export interface FakeToolCallsReply extends FakeReplyOptions {
  toolCalls: FakeToolCall[];
  /** How many deltas each call's arguments are split into (default: up to 3). Calls are interleaved by `index`. */
  argumentChunks?: number;
  /** Optional content streamed before the tool calls. */
  text?: string | string[];
}

/** A stream that breaks after `failAfterChunks` chunks of filler text. */
export interface FakeBreakReply extends FakeReplyOptions {
  failAfterChunks: number;
}

/** An HTTP error before any byte of a reply. */
export interface FakeErrorReply {
  status: number;
  /** Default `{error: {message, type, param: null, code}}`; a string is sent as-is. */
  body?: unknown;
  headers?: Record<string, string>;
  delayMs?: number;
}

/** Never answers (the request is kept open until the client gives up or the fake closes). */
export interface FakeHangReply {
  hang: true;
}

export type FakeReply = FakeTextReply | FakeToolCallsReply | FakeBreakReply | FakeErrorReply | FakeHangReply;
export type FakeScriptEntry = FakeReply | ((request: FakeRequest) => FakeReply | Promise<FakeReply>);

export interface FakeChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface FakeChatRequestBody {
  model: string;
  messages: FakeChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  tools?: unknown[];
  [key: string]: unknown;
}

export interface FakeRequest {
  /** 0-based arrival order since the start or the last reset. */
  index: number;
  /** Lower-cased request headers, without `authorization`. */
  headers: Record<string, string | string[] | undefined>;
  /** Whether an `authorization` header was sent (its value is never kept). */
  hasAuthorization: boolean;
  body: FakeChatRequestBody;
  receivedAt: number;
  /** The reply chosen for it (after a function entry ran). */
  reply?: FakeReply;
  /** The client went away before the reply was complete. */
  aborted: boolean;
  abortedAt?: number;
  /** The reply was completely written. */
  completed: boolean;
}

export interface FakeModelOptions {
  /** Default 0 (a free port). */
  port?: number;
  host?: '127.0.0.1';
  /** Used when the script queue is empty; default echoes the last user message. */
  defaultReply?: FakeScriptEntry;
  /** When set, a request without `Authorization: Bearer <apiKey>` gets OpenAI's 401. */
  apiKey?: string;
  /** Ids listed by `GET /v1/models` (default `['fake-model']`). */
  models?: string[];
}

export interface FakeModel {
  /** Base URL ending in `/v1`, for `new OpenAI({ baseURL })`. */
  readonly url: string;
  readonly port: number;
  /** Every chat request received since the start or the last reset (a live array). */
  readonly requests: readonly FakeRequest[];
  /** Appends replies to the queue; each chat request takes the next one. */
  script(...entries: FakeScriptEntry[]): void;
  /** Scripted replies not yet consumed. */
  pending(): number;
  /** Empties the queue and the recorded requests. */
  reset(): void;
  /** Resolves with the n-th chat request (1-based; default 1) once it has arrived. */
  waitForRequest(n?: number, timeoutMs?: number): Promise<FakeRequest>;
  /** Resolves with the first request whose client went away (or request `index`'s, if given). */
  waitForAbort(opts?: { index?: number; timeoutMs?: number }): Promise<FakeRequest>;
  close(): Promise<void>;
}

const DEFAULT_WAIT_MS = 5_000;

export async function startFakeModel(opts: FakeModelOptions = {}): Promise<FakeModel> {
  const host = opts.host ?? '127.0.0.1';
  const fake = new FakeModelState(opts);
  const server = http.createServer({ noDelay: true }, (req, res) => fake.route(req, res));
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const { queue, requests } = fake;

  return {
    url: `http://${host}:${port}/v1`,
    port,
    requests,
    script(...entries) {
      queue.push(...entries);
    },
    pending: () => queue.length,
    reset() {
      queue.length = 0;
      requests.length = 0;
    },
    waitForRequest(n = 1, timeoutMs = DEFAULT_WAIT_MS) {
      return fake.waitFor(`request #${n}`, () => requests[n - 1], timeoutMs);
    },
    waitForAbort({ index, timeoutMs = DEFAULT_WAIT_MS } = {}) {
      const what = index === undefined ? 'an aborted request' : `request index ${index} to be aborted`;
      return fake.waitFor(what, () => (index === undefined ? requests.find((r) => r.aborted) : requests[index]?.aborted ? requests[index] : undefined), timeoutMs);
    },
    async close() {
      fake.closing = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** The fake's script, what it received, and who waits for what it receives. */
class FakeModelState {
  readonly queue: FakeScriptEntry[] = [];
  readonly requests: FakeRequest[] = [];
  /** Set by close: connections it cuts are not the client going away. */
  closing = false;
  readonly #waiters = new Set<() => void>();
  readonly #defaultReply: FakeScriptEntry;
  readonly #models: string[];
  #seq = 0;

  constructor(private readonly opts: FakeModelOptions) {
    this.#defaultReply = opts.defaultReply ?? ((req) => ({ text: echoText(req.body) }));
    this.#models = opts.models ?? ['fake-model'];
  }

  /** Something changed that a waiter may be waiting for. */
  notify(): void {
    for (const w of [...this.#waiters]) w();
  }

  route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') return this.listModels(req, res);
    if (path === '/v1/chat/completions') {
      if (req.method !== 'POST') return sendError(res, 405, `Method ${req.method} not allowed`, 'invalid_request_error', null);
      return readBody(req, (raw) => this.acceptChat(req, res, raw));
    }
    sendError(res, 404, `Unknown request URL: ${req.method} ${path}`, 'invalid_request_error', 'unknown_url');
  }

  listModels(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (!authorized(req, this.opts.apiKey)) return sendError(res, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    const created = Math.floor(Date.now() / 1000);
    sendJson(res, 200, { object: 'list', data: this.#models.map((id) => ({ id, object: 'model', created, owned_by: 'agentry-fake' })) });
  }

  /** Checks a chat request, records it, and answers it with the next scripted reply. */
  acceptChat(req: http.IncomingMessage, res: http.ServerResponse, raw: string): void {
    if (!authorized(req, this.opts.apiKey)) return sendError(res, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    let body: FakeChatRequestBody;
    try {
      body = JSON.parse(raw) as FakeChatRequestBody;
    } catch {
      return sendError(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null);
    }
    if (typeof body !== 'object' || body === null || !Array.isArray(body.messages)) {
      return sendError(res, 400, "Missing required parameter: 'messages'.", 'invalid_request_error', 'missing_required_parameter');
    }
    const { authorization, ...headers } = req.headers;
    const record: FakeRequest = {
      index: this.requests.length,
      headers,
      hasAuthorization: authorization !== undefined,
      body,
      receivedAt: Date.now(),
      aborted: false,
      completed: false,
    };
    this.requests.push(record);
    const entry = this.queue.length > 0 ? this.queue.shift()! : this.#defaultReply;
    void new ChatExchange(record, res, ++this.#seq, this).run(entry).finally(() => this.notify());
    this.notify();
  }

  waitFor<T>(what: string, check: () => T | undefined, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const tryIt = () => {
        const v = check();
        if (v === undefined) return;
        clearTimeout(timer);
        this.#waiters.delete(tryIt);
        resolve(v);
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(tryIt);
        reject(new Error(`fake model: timed out after ${timeoutMs} ms waiting for ${what} (${this.requests.length} requests so far)`));
      }, timeoutMs);
      this.#waiters.add(tryIt);
      tryIt();
    });
  }
}

/** One chat request being answered: its reply, the client going away, and a scripted break. */
class ChatExchange {
  readonly #ac = new AbortController();
  /** The fake cuts the connection on purpose: that is not the client going away. */
  #breaking = false;

  constructor(
    private readonly record: FakeRequest,
    private readonly res: http.ServerResponse,
    private readonly id: number,
    private readonly fake: FakeModelState,
  ) {
    res.once('close', () => {
      if (!res.writableFinished && !this.#breaking && !fake.closing && !record.aborted) {
        record.aborted = true;
        record.abortedAt = Date.now();
      }
      this.#ac.abort();
      fake.notify();
    });
  }

  async run(entry: FakeScriptEntry): Promise<void> {
    const { record, res } = this;
    let reply: FakeReply;
    try {
      reply = typeof entry === 'function' ? await entry(record) : entry;
    } catch (err) {
      sendError(res, 500, `fake-model script function threw: ${err instanceof Error ? err.message : String(err)}`, 'server_error', null);
      return;
    }
    record.reply = reply;
    if ('hang' in reply) return;
    if (reply.delayMs) await sleep(reply.delayMs, this.#ac.signal);
    if (this.#ac.signal.aborted) return;
    if ('status' in reply) return this.answerError(reply);
    const plan = planReply(record, reply, this.id);
    if (record.body.stream === true) return this.stream(plan, reply);
    this.answerWhole(plan, reply);
  }

  answerError(reply: FakeErrorReply): void {
    const { res } = this;
    if (reply.body === undefined) sendError(res, reply.status, `fake error ${reply.status}`, errorType(reply.status), null, reply.headers);
    else if (typeof reply.body === 'string') sendRaw(res, reply.status, reply.body, 'text/plain; charset=utf-8', reply.headers);
    else sendJson(res, reply.status, reply.body, reply.headers);
    this.record.completed = true;
  }

  /** A non-streamed answer: a chat.completion object, or a hang or a cut connection as scripted. */
  answerWhole(plan: Plan, reply: FakeReplyOptions): void {
    if (reply.hangAfterChunks !== undefined) return;
    if (reply.failAfterChunks !== undefined) {
      this.#breaking = true;
      this.res.socket?.destroy();
      return;
    }
    sendJson(this.res, 200, completionObject(plan), { 'x-request-id': `req_fake_${this.id}` });
    this.record.completed = true;
  }

  async stream(plan: Plan, reply: FakeReplyOptions): Promise<void> {
    const { res, record } = this;
    const chunks = streamChunks(plan, record.body.stream_options?.include_usage === true);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      'x-request-id': `req_fake_${this.id}`,
    });
    const failAt = reply.failAfterChunks ?? Infinity;
    const stopAt = Math.min(failAt, reply.hangAfterChunks ?? Infinity);
    const delay = reply.chunkDelayMs ?? 0;
    if (delay === 0) res.cork();
    let sent = 0;
    for (const chunk of chunks) {
      if (sent >= stopAt || sent >= (reply.endAfterChunks ?? Infinity)) break;
      if (delay > 0 && sent > 0) {
        await sleep(delay, this.#ac.signal);
        if (this.#ac.signal.aborted) return;
      }
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      sent++;
    }
    if (reply.endAfterChunks !== undefined && stopAt === Infinity) {
      // Counted against what was sent: the rest of the answer, and [DONE], never go out.
      if (delay === 0) res.uncork();
      res.end();
      return;
    }
    if (stopAt === Infinity) {
      // Uncorked before the end: Node 24 ends a corked response with its terminating chunk
      // ahead of the chunks it held back, and the client would read only the first delta.
      if (delay === 0) res.uncork();
      res.end('data: [DONE]\n\n');
      record.completed = true;
      return;
    }
    this.stopEarly(sent, delay, failAt === stopAt);
  }

  /**
   * A scripted stop never sends [DONE]. A hang keeps the response open; a break flushes what was
   * written, then destroys the socket (no terminating chunk).
   */
  stopEarly(sent: number, delay: number, breaks: boolean): void {
    const { res } = this;
    if (sent === 0) res.flushHeaders();
    if (delay === 0) res.uncork();
    const socket = res.socket;
    if (breaks && socket) {
      this.#breaking = true;
      socket.end(() => socket.destroy());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Building replies

interface Plan {
  id: string;
  created: number;
  model: string;
  content: string[] | null;
  toolCalls: { id: string; name: string; fragments: string[]; arguments: string }[];
  finishReason: FakeFinishReason | null;
  usage: FakeUsage;
}

function planReply(record: FakeRequest, reply: FakeTextReply | FakeToolCallsReply | FakeBreakReply, id: number): Plan {
  let content: string[] | null = null;
  let toolCalls: Plan['toolCalls'] = [];
  if ('toolCalls' in reply) {
    if (reply.text !== undefined) content = splitText(reply.text);
    const parts = reply.argumentChunks;
    toolCalls = reply.toolCalls.map((c, i) => ({
      id: c.id ?? `call_fake_${id}_${i}`,
      name: c.name,
      arguments: c.arguments,
      fragments: splitInto(c.arguments, parts ?? Math.min(3, Math.max(1, [...c.arguments].length))),
    }));
  } else if ('text' in reply) {
    content = splitText(reply.text);
  } else {
    content = Array.from({ length: reply.failAfterChunks + 2 }, (_, i) => `part${i} `);
  }
  const completionTokens = (content?.length ?? 0) + toolCalls.reduce((n, c) => n + c.fragments.length + 1, 0);
  const promptTokens = Math.max(1, Math.ceil(JSON.stringify(record.body.messages).length / 4));
  const prompt = reply.usage?.prompt_tokens ?? promptTokens;
  const completion = reply.usage?.completion_tokens ?? completionTokens;
  return {
    id: `chatcmpl-fake-${id}`,
    created: Math.floor(record.receivedAt / 1000),
    model: typeof record.body.model === 'string' ? record.body.model : 'fake-model',
    content,
    toolCalls,
    finishReason: reply.omitFinishReason ? null : (reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop')),
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: reply.usage?.total_tokens ?? prompt + completion },
  };
}

function completionObject(p: Plan): unknown {
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: p.content === null ? null : p.content.join(''),
    refusal: null,
    annotations: [],
  };
  if (p.toolCalls.length > 0) {
    message.tool_calls = p.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  }
  return {
    id: p.id,
    object: 'chat.completion',
    created: p.created,
    model: p.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: p.finishReason }],
    usage: p.usage,
    system_fingerprint: null,
  };
}

function streamChunks(p: Plan, includeUsage: boolean): unknown[] {
  const deltas: Record<string, unknown>[] = [];
  if (p.content !== null) {
    deltas.push({ role: 'assistant', content: '', refusal: null });
    for (const c of p.content) deltas.push({ content: c });
  }
  const rounds = Math.max(0, ...p.toolCalls.map((c) => c.fragments.length)) + 1;
  for (let r = 0; r < rounds; r++) {
    p.toolCalls.forEach((c, index) => {
      if (r === 0) deltas.push({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
      else if (r - 1 < c.fragments.length) deltas.push({ tool_calls: [{ index, function: { arguments: c.fragments[r - 1] } }] });
    });
  }
  if (p.content === null) deltas[0] = { role: 'assistant', content: null, ...deltas[0], refusal: null };
  const base = { id: p.id, object: 'chat.completion.chunk', created: p.created, model: p.model, system_fingerprint: null };
  const extra = includeUsage ? { usage: null } : {};
  const chunks: unknown[] = deltas.map((delta) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: null }], ...extra }));
  if (p.finishReason !== null) chunks.push({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: p.finishReason }], ...extra });
  if (includeUsage) chunks.push({ ...base, choices: [], usage: p.usage });
  return chunks;
}

/** Word-sized pieces that join back to the text (whitespace stays with the word before it). */
function splitText(text: string | string[]): string[] {
  if (Array.isArray(text)) return text;
  return text.match(/\s*\S+\s*/g) ?? (text === '' ? [] : [text]);
}

/** `n` nearly equal pieces (by code point) that join back to `s`. */
function splitInto(s: string, n: number): string[] {
  const cps = [...s];
  const count = Math.max(1, Math.min(n, cps.length));
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(cps.slice(Math.floor((i * cps.length) / count), Math.floor(((i + 1) * cps.length) / count)).join(''));
  return out;
}

function echoText(body: FakeChatRequestBody): string {
  const last = [...body.messages].reverse().find((m) => m.role === 'user');
  const c = last?.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) {
    return c
      .map((part: unknown) => (typeof part === 'object' && part !== null && 'text' in part && typeof part.text === 'string' ? part.text : ''))
      .join('');
  }
  return '';
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

function authorized(req: http.IncomingMessage, apiKey: string | undefined): boolean {
  return apiKey === undefined || req.headers.authorization === `Bearer ${apiKey}`;
}

function readBody(req: http.IncomingMessage, done: (raw: string) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => done(Buffer.concat(parts).toString('utf8')));
}

function errorType(status: number): string {
  if (status === 401) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_exceeded';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function sendError(res: http.ServerResponse, status: number, message: string, type: string, code: string | null, headers?: Record<string, string>): void {
  sendJson(res, status, { error: { message, type, param: null, code } }, headers);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  sendRaw(res, status, JSON.stringify(body), 'application/json', headers);
}

function sendRaw(res: http.ServerResponse, status: number, text: string, contentType: string, headers?: Record<string, string>): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
