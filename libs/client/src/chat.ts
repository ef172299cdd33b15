import { StreamError } from './errors.js';
import { parseSse, type SseBody, type SseEvent } from './sse.js';

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string;
}

/** `POST /chat/completions`: `model` is the agent id; `sessionId` keeps a conversation. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  sessionId?: string;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  stop?: string | string[];
  stream_options?: { include_usage?: boolean };
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{ index: number; message: { role: 'assistant'; content: string }; finish_reason: string }>;
  usage?: ChatUsage;
}

/** A server-side tool call as the agui protocol (`X-Stream-Protocol: agui`) reports it. */
export interface AguiToolEvent {
  type: 'TOOL_CALL_START' | 'TOOL_CALL_RESULT';
  toolCallId: string;
  toolCallName: string;
  /** JSON text of the arguments; on START. */
  arguments?: string;
  /** The tool's output; on RESULT. */
  content?: string;
  /** On RESULT, when the tool reported a failure. */
  isError?: boolean;
  toolType: string;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: string; content?: string; tool_calls?: AguiToolEvent[] };
    finish_reason: string | null;
  }>;
  usage?: ChatUsage;
}

/** The text fragment of a chunk, or '' when it carries none. */
export function chunkText(chunk: ChatChunk): string {
  return chunk.choices[0]?.delta.content ?? '';
}

/** The agui tool event of a chunk, if it carries one. */
export function chunkToolEvent(chunk: ChatChunk): AguiToolEvent | undefined {
  return chunk.choices[0]?.delta.tool_calls?.[0];
}

/**
 * The server is trying the model provider again (the gateway's `: retry {...}` comment line):
 * attempt `attempt` of `of` is under way because the one before failed for `reason`.
 */
export interface RetryNotice {
  attempt: number;
  of: number;
  reason: string;
}

/** A comment line's retry notice (`retry {"attempt":2,"of":3,"reason":"..."}`); undefined for any other comment. */
export function parseRetryComment(comment: string): RetryNotice | undefined {
  if (!comment.startsWith('retry ')) return undefined;
  try {
    const v = JSON.parse(comment.slice('retry '.length)) as Partial<RetryNotice> | null;
    if (typeof v?.attempt !== 'number' || typeof v.of !== 'number') return undefined;
    return { attempt: v.attempt, of: v.of, reason: typeof v.reason === 'string' ? v.reason : '' };
  } catch {
    return undefined;
  }
}

/** How a person reads a retry notice: "attempt 2 of 3: provider unreachable". */
export function describeRetry(n: RetryNotice): string {
  return `attempt ${n.attempt} of ${n.of}${n.reason ? `: ${n.reason}` : ''}`;
}

/** Where a dropped stream picks up: its run, and the id of the last event the client got (none: from the start). */
export interface ResumePoint {
  runId: string;
  lastEventId?: string;
}

/** How a streamed chat resumes by itself when its connection drops (see readChatStream). */
export interface ResumeOptions {
  /** Opens the run's stream again after `point` (`GET /runs/{runId}/events` with `Last-Event-ID`). */
  reconnect(point: ResumePoint, signal: AbortSignal | undefined): Promise<SseBody>;
  /** Reconnections in a row that may fail before the stream gives up; default 5. */
  tries?: number;
  /** The wait before the first reconnection, doubled before each next one; default 100 ms. */
  delayMs?: number;
  /** Called each time the stream went on over a new connection (1 for the first resume of this stream). */
  onResume?(resumes: number): void;
  signal?: AbortSignal;
}

const RUN_ID = /^[0-9a-f]{32}$/;

function runIdOf(lastEventId: string | undefined, chunkId: string | undefined): string | undefined {
  const fromEvent = lastEventId?.split(':')[0];
  if (fromEvent && RUN_ID.test(fromEvent)) return fromEvent;
  const fromChunk = chunkId?.startsWith('chatcmpl-') ? chunkId.slice('chatcmpl-'.length) : undefined;
  return fromChunk && RUN_ID.test(fromChunk) ? fromChunk : undefined;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Errors that say the run cannot be resumed at all (unknown, gone, refused): no point trying again. */
function isFinal(err: unknown): boolean {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === 'number' && status >= 400 && status < 500 && status !== 408 && status !== 429;
}

function cannotResume(err: unknown): StreamError {
  const status = (err as { status?: unknown } | null)?.status;
  return new StreamError(`the connection dropped and the stream could not be resumed: ${(err as Error).message ?? String(err)}`, typeof status === 'number' ? status : undefined);
}

/**
 * The chunks of a streamed completion, each as soon as it arrives. Throws StreamError for an
 * `{error}` event (a failure after the stream started) and for a stream that ends without
 * `data: [DONE]`.
 *
 * With `resume`, a connection that drops mid-stream (the body fails, or ends without [DONE])
 * is opened again after the last event id seen, and the chunks go on as if nothing happened:
 * the server keeps the run alive a grace period for that and sends what came after the id. An
 * `{error}` event and the caller's abort are not drops: they end the stream as before.
 *
 * The server puts the id on the last chunk of each run event, so the chunks yielded since the
 * last id (a finish or usage chunk before [DONE]; every chunk, the role one included, when no
 * id came yet) are sent again on resume: as many are skipped, which keeps each chunk once.
 *
 * `onRetry` hears of each provider retry the server announces (a comment line, so no chunk).
 */
export async function* readChatStream(body: SseBody, resume?: ResumeOptions, opts: { onRetry?: (notice: RetryNotice) => void } = {}): AsyncGenerator<ChatChunk> {
  const onComment = opts.onRetry
    ? (comment: string) => {
        const notice = parseRetryComment(comment);
        if (notice) opts.onRetry!(notice);
      }
    : undefined;
  let lastEventId: string | undefined;
  let chunkId: string | undefined;
  /** Chunks yielded since the last id: the resumed stream repeats them. */
  let sinceId = 0;
  let resumes = 0;
  /** Connections in a row that brought nothing new (a refused one, or one cut before any chunk). */
  let failures = 0;
  for (;;) {
    let skip = sinceId;
    let progressed = false;
    let dropped: unknown;
    const events = parseSse(body, onComment)[Symbol.asyncIterator]();
    try {
      for (;;) {
        let next: IteratorResult<SseEvent>;
        try {
          next = await events.next();
        } catch (err) {
          dropped = err;
          break;
        }
        if (next.done) break;
        const event = next.value;
        if (event.data === '[DONE]') return;
        let parsed: unknown;
        try {
          parsed = JSON.parse(event.data);
        } catch {
          throw new StreamError(`the server sent an event that is not JSON: ${event.data.slice(0, 200)}`);
        }
        const error = (parsed as { error?: unknown }).error;
        if (error !== undefined) {
          const e = error as { message?: unknown; code?: unknown } | string;
          const message = typeof e === 'string' ? e : typeof e?.message === 'string' ? e.message : JSON.stringify(e);
          const code = typeof e === 'object' && typeof e?.code === 'number' ? e.code : undefined;
          throw new StreamError(message, code);
        }
        if (skip > 0) {
          skip--;
          continue;
        }
        // The parser keeps an id for the events after it (as EventSource does): only a new one is this chunk's.
        if (event.id !== undefined && event.id !== lastEventId) {
          lastEventId = event.id;
          sinceId = 0;
        } else sinceId++;
        chunkId ??= (parsed as { id?: unknown }).id as string | undefined;
        progressed = true;
        yield parsed as ChatChunk;
      }
    } finally {
      await events.return?.(undefined);
    }
    if (resume?.signal?.aborted) throw dropped ?? resume.signal.reason;
    if (dropped !== undefined && (dropped as Error).name === 'AbortError') throw dropped;
    const runId = runIdOf(lastEventId, chunkId);
    if (!resume || !runId) {
      if (dropped !== undefined) throw new StreamError(`the stream broke before it was complete (${(dropped as Error).message ?? String(dropped)})`);
      throw new StreamError('the stream ended before it was complete (no [DONE])');
    }
    if (progressed) failures = 0;
    else if (resumes > 0) failures++;
    ({ body, failures } = await reopen(resume, { runId, ...(lastEventId !== undefined ? { lastEventId } : {}) }, failures));
    resumes++;
    resume.onResume?.(resumes);
  }
}

/**
 * Connects again, waiting longer before each try (`failures` tries in a row failed already);
 * throws the StreamError a person reads when it cannot. Answers the body and the failures so far.
 */
async function reopen(resume: ResumeOptions, point: ResumePoint, failures: number): Promise<{ body: SseBody; failures: number }> {
  const tries = resume.tries ?? 5;
  let last: unknown = new Error('it dropped again each time');
  for (; failures < tries; failures++) {
    await sleep((resume.delayMs ?? 100) * 2 ** failures, resume.signal);
    try {
      return { body: await resume.reconnect(point, resume.signal), failures };
    } catch (err) {
      if ((err as Error).name === 'AbortError' || resume.signal?.aborted) throw err;
      if (isFinal(err)) throw cannotResume(err);
      last = err;
    }
  }
  throw cannotResume(last);
}
