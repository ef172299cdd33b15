import type { Logger } from 'pino';
import { AppError, Errors } from '@agentry/errors';
import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { getProvider, type Db, type ProviderRecord } from '@agentry/db';
import {
  ConnectTimeoutError,
  ProviderConnectionError,
  ProviderStatusError,
  ProviderStreamError,
  SseParser,
  createProviderHttp,
  type ProviderHttp,
  type SseMessage,
} from './http.js';
import { modelInfoOf, type ModelInfo } from '../compaction/compaction.js';
import { resolveModel } from '@agentry/definitions';
import { DEFAULT_MODEL_TIMEOUTS, type ModelCallRequest, type ModelEvent, type ModelTimeouts, type ToolCall } from './types.js';

/** The master-key sealer as this needs it (runtime's `Sealer`). */
export interface SecretOpener {
  open(sealed: string): string;
}

/** The pub/sub side of runtime's `Bus`. */
export interface InvalidationSource {
  pubsub: { subscribe(channel: typeof PubSubChannels.invalidate, handler: (message: InvalidateMessage) => void): Promise<() => Promise<void>> };
}

export interface ModelProvidersDeps {
  db: Db;
  secrets: SecretOpener;
  /** The live configuration (`models.default_provider` is read on every call). */
  config: () => { models: { default_provider: string } };
  bus: InvalidationSource;
  logger: Logger;
  timeouts?: Partial<ModelTimeouts>;
}

/** Sent as the API key to a provider that has none (some local servers want a Bearer anyway). */
const NO_KEY = 'no-key';
/** A cached provider row and client live at most this long, should an invalidation be missed. */
const CACHE_MS = 30_000;
/** A `Retry-After` longer than this moves on to the next provider instead of waiting. */
const MAX_RETRY_AFTER_MS = 20_000;

interface Cached {
  record: ProviderRecord;
  /** `<base url>/chat/completions`. */
  url: URL;
  /** The request headers; hold the clear key: never logged, never part of an error. */
  headers: Record<string, string>;
  apiKey: string | null;
  loadedAt: number;
}

/** The part of a chat completion chunk read here (OpenAI's `chat.completion.chunk`). */
interface ChatChunk {
  choices?: Array<{
    index?: number;
    delta?: { content?: string | null; reasoning_content?: unknown; tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }> };
    finish_reason?: string | null;
  }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  error?: unknown;
}

interface Target {
  provider: string;
  model: string;
  entry: Cached;
}

/** Why one attempt failed. */
interface Failure {
  message: string;
  /** The kind of failure in a few words, for the person waiting ("provider unreachable"). */
  reason: string;
  retryable: boolean;
  retryAfterMs?: number;
}

/** What fixes a missing provider, named in every "no model provider" error (issue 42): the CLI command and the web page. */
export const ADD_PROVIDER_FIX = 'add one with `agentry providers add <id> --base-url <url> --default` or on the web UI\'s Model providers page (/providers)';

/** The attempt's own timers fired (first token, silence, total). */
class AttemptTimeout extends Error {}

/**
 * Calls the configured model providers (OpenAI-compatible chat completions, streamed; our own
 * HTTP and event-stream parsing, see http.ts): one retry policy here. Before the first token is yielded, connection errors,
 * timeouts and HTTP 408/409/429/5xx are retried with exponential backoff, then the request's
 * `failover` entries are tried in order; once a token was yielded, a failure is thrown as is.
 * Provider rows and their clients are cached per replica and dropped on `invalidate
 * {area:'providers'}` (and after 30 s at most).
 */
export class ModelProviders {
  readonly #deps: ModelProvidersDeps;
  readonly #timeouts: ModelTimeouts;
  readonly #http: ProviderHttp;
  readonly #cache = new Map<string, Cached>();
  #generation = 0;
  #unsubscribe: (() => Promise<void>) | null = null;

  constructor(deps: ModelProvidersDeps) {
    this.#deps = deps;
    this.#timeouts = { ...DEFAULT_MODEL_TIMEOUTS, ...deps.timeouts };
    this.#http = createProviderHttp({ connectMs: this.#timeouts.connectMs });
  }

  async start(): Promise<void> {
    if (this.#unsubscribe) return;
    this.#unsubscribe = await this.#deps.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => {
      if (m.area === 'providers') this.invalidate(m.id);
    });
  }

  /** Drops the cached row and client of one provider (or of all). */
  invalidate(id?: string): void {
    this.#generation += 1;
    if (id === undefined) this.#cache.clear();
    else this.#cache.delete(id);
  }

  async close(): Promise<void> {
    await this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.#cache.clear();
    this.#http.close();
  }

  /** Streams one answer: text as it comes, then the assembled tool calls (if any), then done. */
  async *stream(req: ModelCallRequest): AsyncGenerator<ModelEvent> {
    throwIfAborted(req.signal);
    const targets = await this.#targets(req);
    const t = this.#timeouts;
    const deadline = Date.now() + t.totalMs;
    const failures: string[] = [];
    for (const target of targets) {
      let attempts = 0;
      let last: Failure | undefined;
      for (let retry = 0; retry <= t.retries; retry++) {
        if (retry > 0) {
          const wait = Math.max(t.backoffMs * 2 ** (retry - 1), last?.retryAfterMs ?? 0);
          if (Date.now() + wait >= deadline) break;
          // Told before the backoff: the person waiting learns at once that the call goes on.
          yield { type: 'retry', attempt: retry + 1, of: t.retries + 1, reason: last?.reason ?? 'provider error' };
          await sleep(wait, req.signal);
        }
        attempts += 1;
        let yielded = false;
        try {
          for await (const ev of this.#attempt(target, req, deadline)) {
            if (ev.type === 'text') yielded = true;
            yield ev;
          }
          return;
        } catch (err) {
          throwIfAborted(req.signal);
          if (err instanceof AppError) throw err;
          last = describeFailure(err, target.entry.apiKey);
          if (yielded) {
            throw new Errors.UPSTREAM(`${label(target)}: the answer broke off after it had started: ${last.message}`, { cause: err });
          }
          this.#deps.logger.warn(
            { provider: target.provider, model: target.model, attempt: attempts, error: last.message, retryable: last.retryable },
            'model provider call failed',
          );
          if (!last.retryable || (last.retryAfterMs ?? 0) > MAX_RETRY_AFTER_MS || Date.now() >= deadline) break;
        }
      }
      if (last) failures.push(`${label(target)}: ${last.message}${attempts > 1 ? ` (${attempts} attempts)` : ''}`);
      if (Date.now() >= deadline) break;
    }
    throw new Errors.UPSTREAM(failures.join('; ') || 'no model provider answered');
  }

  /** The primary target (unknown: a VALIDATION error naming it), then the usable failover ones. */
  /** The model a provider and name resolve to, with its `context_window` (from the cached row); undefined when unknown. */
  async modelInfo(req: { provider?: string; model?: string }): Promise<ModelInfo | undefined> {
    const provider = req.provider || this.#deps.config().models.default_provider;
    const entry = provider ? await this.#provider(provider) : undefined;
    return entry ? modelInfoOf(provider, entry.record, req.model) : undefined;
  }

  async #targets(req: ModelCallRequest): Promise<Target[]> {
    const providerId = req.provider || this.#deps.config().models.default_provider;
    if (!providerId) throw new Errors.VALIDATION(`no model provider: the agent names none and models.default_provider is not set; ${ADD_PROVIDER_FIX}`);
    const primary = await this.#target(providerId, req.model);
    const targets = [primary];
    for (const f of req.failover ?? []) {
      try {
        const t = await this.#target(f.provider || providerId, f.model);
        if (!targets.some((x) => x.provider === t.provider && x.model === t.model)) targets.push(t);
      } catch (err) {
        // A failover entry that does not resolve must not stop the primary from answering.
        this.#deps.logger.warn({ provider: f.provider, model: f.model, error: (err as Error).message }, 'failover entry skipped');
      }
    }
    return targets;
  }

  async #target(providerId: string, requested: string | undefined): Promise<Target> {
    const entry = await this.#provider(providerId);
    if (!entry) throw new Errors.VALIDATION(`unknown model provider "${providerId}"; ${ADD_PROVIDER_FIX}`);
    const model = resolveModel(entry.record, requested);
    if (!model) {
      const known = entry.record.models.flatMap((m) => (m.alias ? [m.name, m.alias] : [m.name]));
      throw new Errors.VALIDATION(
        requested
          ? `model provider "${providerId}" has no model "${requested}"${known.length > 0 ? ` (it has ${[...new Set(known)].join(', ')})` : ''}`
          : `model provider "${providerId}" has no default model: set its model, or name one in the agent`,
      );
    }
    return { provider: providerId, model, entry };
  }

  async #provider(id: string): Promise<Cached | undefined> {
    const cached = this.#cache.get(id);
    if (cached && Date.now() - cached.loadedAt < CACHE_MS) return cached;
    const generation = this.#generation;
    const record = await getProvider(this.#deps.db, id);
    if (!record) return undefined;
    const apiKey = record.apiKeySealed ? this.#deps.secrets.open(record.apiKeySealed) : null;
    let url: URL;
    try {
      url = new URL(`${record.baseUrl.replace(/\/+$/, '')}/chat/completions`);
    } catch {
      throw new Errors.VALIDATION(`model provider "${id}" has a base url that is not a URL`);
    }
    const entry: Cached = {
      record,
      url,
      headers: { authorization: `Bearer ${apiKey ?? NO_KEY}`, accept: 'text/event-stream', 'user-agent': 'agentry' },
      apiKey,
      loadedAt: Date.now(),
    };
    // An invalidation while loading: the row may be stale already; use it once, cache it not.
    if (generation === this.#generation) this.#cache.set(id, entry);
    return entry;
  }

  /** One HTTP call to one provider, with its first-token, silence and total timers. */
  async *#attempt(target: Target, req: ModelCallRequest, deadline: number): AsyncGenerator<ModelEvent> {
    const timers = new AttemptTimers(this.#timeouts, req.signal, deadline);
    const calls = new ToolCallAssembler();
    let finishReason: string | undefined;
    let usage: Extract<ModelEvent, { type: 'done' }>['usage'];
    let done = false;
    // The model events of one socket chunk's messages; whatever follows [DONE] is ignored (as OpenAI's SDK does).
    const take = function* (messages: SseMessage[]): Generator<ModelEvent> {
      for (const message of messages) {
        if (done) return;
        if (message.data.startsWith('[DONE]')) {
          done = true;
          return;
        }
        const chunk = parseChunk(message.data);
        if (chunk.usage) {
          usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens, totalTokens: chunk.usage.total_tokens };
        }
        for (const choice of chunk.choices ?? []) {
          if (choice.index !== undefined && choice.index !== 0) continue;
          const delta = choice.delta ?? {};
          timers.chunk(Boolean(delta.content || delta.tool_calls?.length || delta.reasoning_content));
          for (const tc of delta.tool_calls ?? []) calls.add(tc);
          if (delta.content) yield { type: 'text', text: delta.content };
          if (choice.finish_reason) finishReason = choice.finish_reason;
        }
      }
    };
    let completed = false;
    try {
      const res = await this.#http.postJson(target.entry.url, target.entry.headers, JSON.stringify(requestBody(target, req)), timers.signal);
      res.setEncoding('utf8');
      const parser = new SseParser();
      for await (const text of res as AsyncIterable<string>) yield* take(parser.push(text));
      yield* take(parser.end());
      // Closed without [DONE] and without a finish_reason: cut off on the way (a proxy or the
      // provider gave up), not finished.
      if (finishReason === undefined && !done) throw new StreamCutOffError();
      completed = true;
    } catch (err) {
      throw timers.timedOut ?? err;
    } finally {
      timers.close(completed);
    }
    const assembled = calls.assembled();
    if (assembled.length > 0) yield { type: 'tool_calls', calls: assembled };
    yield {
      type: 'done',
      finishReason: finishReason ?? (assembled.length > 0 ? 'tool_calls' : 'stop'),
      provider: target.provider,
      model: target.model,
      ...(usage ? { usage } : {}),
    };
  }
}

/** A provider stream that ended without `[DONE]` and without a finish_reason. */
class StreamCutOffError extends Error {
  constructor() {
    super('the stream ended without [DONE] and without a finish_reason (cut off)');
    this.name = 'StreamCutOffError';
  }
}

/**
 * The timers of one attempt: the total deadline, no first token within `firstTokenMs`, then no
 * data for as long once it started. Either aborts the call with an AttemptTimeout; the caller's
 * cancel aborts it with the caller's reason.
 */
class AttemptTimers {
  readonly #ctl = new AbortController();
  readonly #total: ReturnType<typeof setTimeout>;
  #silence: ReturnType<typeof setTimeout>;
  #started = false;
  timedOut: AttemptTimeout | undefined;
  readonly #onAbort = () => this.#ctl.abort(this.caller.reason);

  constructor(
    private readonly t: Pick<ModelTimeouts, 'totalMs' | 'firstTokenMs'>,
    private readonly caller: AbortSignal,
    private readonly deadline: number,
  ) {
    caller.addEventListener('abort', this.#onAbort, { once: true });
    this.#total = setTimeout(() => this.#fail(`the call took longer than ${t.totalMs} ms`), this.remaining());
    this.#silence = setTimeout(() => this.#fail(`no first token within ${t.firstTokenMs} ms`), Math.min(t.firstTokenMs, this.remaining()));
  }

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }

  remaining(): number {
    return Math.max(0, this.deadline - Date.now());
  }

  /** A chunk arrived: one with content starts the silence timer over, and once started any chunk does. */
  chunk(hasContent: boolean): void {
    if (this.#started) {
      // Per token: the same timer moved, not a new one made (a paced stream's worker did both per chunk).
      this.#silence.refresh();
      return;
    }
    if (!hasContent) return;
    this.#started = true;
    clearTimeout(this.#silence);
    this.#silence = setTimeout(() => this.#fail(`no data for ${this.t.firstTokenMs} ms`), this.t.firstTokenMs);
  }

  #fail(message: string): void {
    this.timedOut = new AttemptTimeout(message);
    this.#ctl.abort(this.timedOut);
  }

  /** `completed`: the response was read to its end (nothing to abort). */
  close(completed: boolean): void {
    clearTimeout(this.#total);
    clearTimeout(this.#silence);
    this.caller.removeEventListener('abort', this.#onAbort);
    // Ends the HTTP request when the caller stopped reading early (or anything threw).
    if (!completed) this.#ctl.abort(new Error('model call finished'));
  }
}

/** Tool calls arrive in pieces by index: ids and names once (or split), arguments as they stream. */
class ToolCallAssembler {
  readonly #calls = new Map<number, ToolCall>();

  add(tc: { index?: number; id?: string; function?: { name?: string; arguments?: string } }): void {
    const index = tc.index ?? this.#calls.size;
    const call = this.#calls.get(index) ?? { id: '', name: '', arguments: '' };
    if (tc.id) call.id = tc.id;
    const name = tc.function?.name;
    if (name && name !== call.name) call.name = call.name ? call.name + name : name;
    if (tc.function?.arguments) call.arguments += tc.function.arguments;
    this.#calls.set(index, call);
  }

  assembled(): ToolCall[] {
    return [...this.#calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, c]) => ({ id: c.id || `call_${index}_${Date.now().toString(36)}`, name: c.name, arguments: c.arguments }));
  }
}

function requestBody(target: Target, req: ModelCallRequest) {
  return {
    model: target.model,
    messages: req.messages.map(toWireMessage),
    stream: true as const,
    stream_options: { include_usage: true },
    ...(req.params?.temperature !== undefined ? { temperature: req.params.temperature } : {}),
    ...(req.params?.top_p !== undefined ? { top_p: req.params.top_p } : {}),
    ...(req.params?.max_tokens !== undefined ? { max_tokens: req.params.max_tokens } : {}),
    ...(req.params?.stop !== undefined ? { stop: req.params.stop } : {}),
    ...(req.params?.response_format !== undefined ? { response_format: req.params.response_format } : {}),
    ...(req.tools && req.tools.length > 0 ? { tools: req.tools } : {}),
    ...(req.tools && req.tools.length > 0 && req.tool_choice !== undefined ? { tool_choice: req.tool_choice } : {}),
    ...(req.tools && req.tools.length > 0 && req.parallel_tool_calls !== undefined ? { parallel_tool_calls: req.parallel_tool_calls } : {}),
  };
}

function label(t: Target): string {
  return `provider "${t.provider}" (model ${t.model})`;
}

function toWireMessage(m: ModelCallRequest['messages'][number]): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls !== undefined) out.tool_calls = m.tool_calls;
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  return out;
}

const RETRY_STATUS = (status: number) => status === 408 || status === 409 || status === 429 || status >= 500;

/**
 * An error's code and message as one phrase, the code only when the message does not already
 * say it (Node's `connect ECONNREFUSED 127.0.0.1:1` carries code ECONNREFUSED: once is enough).
 */
function codeAndMessage(code: unknown, message: unknown): string {
  const text = typeof message === 'string' ? message : '';
  const c = typeof code === 'string' && !text.includes(code) ? code : '';
  return [c, text].filter(Boolean).join(' ');
}

/** A short, key-free description of a failed attempt, and whether to try it again. */
function describeFailure(err: unknown, apiKey: string | null): Failure {
  const scrub = (s: string) => {
    let out = s.replace(/\s+/g, ' ').trim();
    if (apiKey) out = out.split(apiKey).join('[redacted]');
    return out.length > 300 ? `${out.slice(0, 300)}...` : out;
  };
  if (err instanceof AttemptTimeout) return { message: err.message, reason: 'provider did not answer in time', retryable: true };
  if (err instanceof ProviderConnectionError) {
    const cause = err.cause as { code?: unknown; message?: unknown };
    if (cause instanceof ConnectTimeoutError) return { message: `connect: ${cause.message}`, reason: 'provider unreachable', retryable: true };
    const detail = codeAndMessage(cause.code, cause.message);
    return { message: scrub(`connection failed${detail ? `: ${detail}` : ''}`), reason: 'provider unreachable', retryable: true };
  }
  if (err instanceof ProviderStatusError) {
    if (err.status === 401 || err.status === 403) {
      return { message: `HTTP ${err.status}: the provider refused the credentials (check its api key)`, reason: 'provider refused the credentials', retryable: false };
    }
    return {
      message: scrub(err.message),
      reason: err.status === 429 ? 'provider rate limit (HTTP 429)' : `provider error (HTTP ${err.status})`,
      retryable: RETRY_STATUS(err.status),
      ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
    };
  }
  if (err instanceof ProviderStreamError) return { message: scrub(err.message), reason: 'provider stream broke', retryable: err.retryable };
  const e = err as { code?: unknown; message?: unknown } | null;
  const detail = codeAndMessage(e?.code, typeof e?.message === 'string' ? e.message : String(err));
  return { message: scrub(`the connection broke: ${detail}`), reason: 'connection to the provider broke', retryable: true };
}

/** One event's JSON; an `error` object in it is the provider's error report. */
function parseChunk(data: string): ChatChunk {
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    throw new ProviderStreamError(`the provider sent an event that is not JSON: ${data.slice(0, 100)}`, true);
  }
  if (!chunk || typeof chunk !== 'object') throw new ProviderStreamError(`the provider sent an event that is not an object: ${data.slice(0, 100)}`, true);
  const error = (chunk as ChatChunk).error;
  if (error) {
    const message = typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string' ? (error as { message: string }).message : JSON.stringify(error);
    throw new ProviderStreamError(`the provider reported an error: ${message}`, false);
  }
  return chunk as ChatChunk;
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error(`aborted: ${String(signal.reason)}`);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      if (signal.aborted) reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      else resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
