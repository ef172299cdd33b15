import OpenAI from 'openai';
import type { Logger } from 'pino';
import { AppError, Errors } from '@agentry/errors';
import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { getProvider, type Db, type ProviderRecord } from '@agentry/db';
import { ConnectTimeoutError, createProviderFetch, sawDone, type ProviderFetch } from './http.js';
import { modelInfoOf, type ModelInfo } from '../compaction/compaction.js';
import { resolveModel } from './resolve.js';
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
  /** Holds the clear key: never logged, never part of an error. */
  client: OpenAI;
  apiKey: string | null;
  loadedAt: number;
}

interface Target {
  provider: string;
  model: string;
  entry: Cached;
}

/** Why one attempt failed. */
interface Failure {
  message: string;
  retryable: boolean;
  retryAfterMs?: number;
}

/** The attempt's own timers fired (first token, silence, total). */
class AttemptTimeout extends Error {}

/**
 * Calls the configured model providers (OpenAI-compatible, through the `openai` SDK with its own
 * retries off): one retry policy here. Before the first token is yielded, connection errors,
 * timeouts and HTTP 408/409/429/5xx are retried with exponential backoff, then the request's
 * `failover` entries are tried in order; once a token was yielded, a failure is thrown as is.
 * Provider rows and their clients are cached per replica and dropped on `invalidate
 * {area:'providers'}` (and after 30 s at most).
 */
export class ModelProviders {
  readonly #deps: ModelProvidersDeps;
  readonly #timeouts: ModelTimeouts;
  readonly #fetch: ProviderFetch;
  readonly #cache = new Map<string, Cached>();
  #generation = 0;
  #unsubscribe: (() => Promise<void>) | null = null;

  constructor(deps: ModelProvidersDeps) {
    this.#deps = deps;
    this.#timeouts = { ...DEFAULT_MODEL_TIMEOUTS, ...deps.timeouts };
    this.#fetch = createProviderFetch({ connectMs: this.#timeouts.connectMs });
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
    this.#fetch.close();
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
    if (!providerId) throw new Errors.VALIDATION('no model provider: the agent names none and models.default_provider is not set');
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
    if (!entry) throw new Errors.VALIDATION(`unknown model provider "${providerId}"`);
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
    const entry: Cached = {
      record,
      apiKey,
      loadedAt: Date.now(),
      client: new OpenAI({
        apiKey: apiKey ?? NO_KEY,
        // Explicit nulls: the SDK would otherwise read OPENAI_* variables from the environment.
        adminAPIKey: null,
        organization: null,
        project: null,
        webhookSecret: null,
        baseURL: record.baseUrl,
        maxRetries: 0,
        timeout: this.#timeouts.totalMs,
        fetch: this.#fetch.fetch,
        logLevel: 'off',
      }),
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
    try {
      const { data: stream, response } = await target.entry.client.chat.completions
        .create(requestBody(target, req), { signal: timers.signal, timeout: Math.max(1, timers.remaining()) })
        .withResponse();
      for await (const chunk of stream) {
        if (chunk.usage) {
          usage = {
            promptTokens: chunk.usage.prompt_tokens,
            completionTokens: chunk.usage.completion_tokens,
            totalTokens: chunk.usage.total_tokens,
          };
        }
        for (const choice of chunk.choices ?? []) {
          if (choice.index !== undefined && choice.index !== 0) continue;
          const delta = choice.delta ?? {};
          timers.chunk(Boolean(delta.content || delta.tool_calls?.length || (delta as { reasoning_content?: unknown }).reasoning_content));
          for (const tc of delta.tool_calls ?? []) calls.add(tc);
          if (delta.content) yield { type: 'text', text: delta.content };
          if (choice.finish_reason) finishReason = choice.finish_reason;
        }
      }
      // Closed without [DONE] and without a finish_reason: cut off on the way (a proxy or the
      // provider gave up), not finished; the SDK ends its loop the same way for both.
      if (finishReason === undefined && sawDone(response) === false) throw new StreamCutOffError();
    } catch (err) {
      throw timers.timedOut ?? err;
    } finally {
      timers.close();
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
    if (!hasContent && !this.#started) return;
    this.#started = true;
    clearTimeout(this.#silence);
    this.#silence = setTimeout(() => this.#fail(`no data for ${this.t.firstTokenMs} ms`), this.t.firstTokenMs);
  }

  #fail(message: string): void {
    this.timedOut = new AttemptTimeout(message);
    this.#ctl.abort(this.timedOut);
  }

  close(): void {
    clearTimeout(this.#total);
    clearTimeout(this.#silence);
    this.caller.removeEventListener('abort', this.#onAbort);
    // Ends the HTTP request when the caller stopped reading early (or anything threw).
    this.#ctl.abort(new Error('model call finished'));
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
    ...(req.params?.response_format !== undefined ? { response_format: req.params.response_format as OpenAI.Chat.ChatCompletionCreateParams['response_format'] } : {}),
    ...(req.tools && req.tools.length > 0 ? { tools: req.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
  };
}

function label(t: Target): string {
  return `provider "${t.provider}" (model ${t.model})`;
}

function toWireMessage(m: ModelCallRequest['messages'][number]): OpenAI.Chat.ChatCompletionMessageParam {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls !== undefined) out.tool_calls = m.tool_calls;
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  return out as unknown as OpenAI.Chat.ChatCompletionMessageParam;
}

const RETRY_STATUS = (status: number) => status === 408 || status === 409 || status === 429 || status >= 500;

/** A short, key-free description of a failed attempt, and whether to try it again. */
function describeFailure(err: unknown, apiKey: string | null): Failure {
  const scrub = (s: string) => {
    let out = s.replace(/\s+/g, ' ').trim();
    if (apiKey) out = out.split(apiKey).join('[redacted]');
    return out.length > 300 ? `${out.slice(0, 300)}...` : out;
  };
  if (err instanceof AttemptTimeout) return { message: err.message, retryable: true };
  if (err instanceof OpenAI.APIConnectionTimeoutError) return { message: 'the request timed out', retryable: true };
  if (err instanceof OpenAI.APIConnectionError) {
    const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
    if (cause instanceof ConnectTimeoutError) return { message: `connect: ${cause.message}`, retryable: true };
    const detail = cause ? [typeof cause.code === 'string' ? cause.code : '', typeof cause.message === 'string' ? cause.message : ''].filter(Boolean).join(' ') : '';
    return { message: scrub(`connection failed${detail ? `: ${detail}` : ''}`), retryable: true };
  }
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    const status = err.status;
    const retryAfterMs = parseRetryAfter(err.headers);
    if (status === 401 || status === 403) {
      return { message: `HTTP ${status}: the provider refused the credentials (check its api key)`, retryable: false };
    }
    const upstream = (err.error as { message?: unknown } | undefined)?.message;
    const text = typeof upstream === 'string' ? upstream : err.message.replace(/^\d{3}\s*/, '');
    return { message: scrub(`HTTP ${status}${text ? `: ${text}` : ''}`), retryable: RETRY_STATUS(status), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  }
  if (err instanceof OpenAI.APIError) {
    // An `error` event inside the stream.
    return { message: scrub(`the provider reported an error: ${err.message}`), retryable: false };
  }
  const e = err as { code?: unknown; message?: unknown } | null;
  const detail = [typeof e?.code === 'string' ? e.code : '', typeof e?.message === 'string' ? e.message : String(err)].filter(Boolean).join(' ');
  return { message: scrub(`the connection broke: ${detail}`), retryable: true };
}

function parseRetryAfter(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const raw = headers?.get('retry-after');
  if (!raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
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
