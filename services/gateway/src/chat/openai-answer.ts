import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '@agentry/contracts';
import { AppError } from '@agentry/errors';
import type { RunOutcome } from '@agentry/db';
import type { ChatRun, RunControl } from './chat-run.js';
import { EventGapError, storedEnding, type RunRelay } from '@agentry/runs';
import { retryComment, SseWriter } from './sse-writer.js';
import { aguiToolResult, aguiToolStart, chunk, completion, contentChunkJson, streamError, toolCallDelta, usageChunk, type CompletionMeta, type DoneEvent } from './openai-chunks.js';

/**
 * The two shapes of a chat completion answer, read from a run's relay: one JSON body, or SSE
 * `chat.completion.chunk` lines. Both end from the stored run when its last events were lost.
 */

/**
 * The non-stream answer: the text events joined, then the `done` event's finish and usage. A
 * failed run is its status and message as `{error}`; a client gone is no answer at all.
 */
export async function awaitCompletion(run: ChatRun, reply: FastifyReply, relay: RunRelay, meta: CompletionMeta): Promise<unknown> {
  let content = '';
  for (;;) {
    let next: Awaited<ReturnType<RunRelay['next']>>;
    try {
      next = await relay.next();
    } catch (err) {
      if (err instanceof EventGapError) {
        await run.cancel(`event stream gap: ${err.detail}`);
        // 503 as for a relay that lost its last events: nothing is wrong with the request, a retry may well work.
        throw new AppError('RUN_FAILED', 503, err.message);
      }
      throw err;
    }
    // Nobody reads the answer any more (the close handler has cancelled the run): send nothing.
    if (next.type === 'closed') {
      reply.hijack();
      return reply;
    }
    if (next.type === 'ended') {
      run.settle();
      return storedCompletion(next.run, meta);
    }
    const event = next.event;
    if (event.type === 'text') content += event.text;
    else if (event.type === 'error') {
      run.settle();
      throw runFailure(event.message, event.status);
    } else if (event.type === 'done') {
      run.settle();
      return completion(meta, content, event.finishReason, event.usage, event.toolCalls);
    }
  }
}

/**
 * The non-stream answer of a run whose events were lost but whose outcome is stored: its output,
 * or its stored error with the status the event would have carried.
 */
function storedCompletion(stored: RunOutcome | undefined, meta: CompletionMeta) {
  const ending = storedEnding(stored, '');
  if ('error' in ending) throw new AppError('RUN_FAILED', ending.status, ending.error);
  return completion(meta, ending.rest, 'stop', stored?.usage as DoneEvent['usage'] | null | undefined);
}

/** What a run's failure answers without a stream: the event's status when it is an HTTP error one, else 502. */
export function runFailure(message: string, status: number | undefined): AppError {
  return new AppError('RUN_FAILED', status && status >= 400 ? status : 502, message);
}

/**
 * The SSE side of one streamed answer: the role chunk goes out with the run's first event (the
 * headers with it), and a failure before that is thrown as the HTTP error the non-stream answer
 * gives; after it, the failure is one error event and the stream closes without [DONE].
 *
 * Each run event's chunks end with the event's id (`<runId>:<seq>`), on the last chunk it made:
 * a client that reconnects with it as `Last-Event-ID` has every chunk up to there. A resumed
 * stream goes through the events up to that id muted (their state kept, nothing written), so
 * that what follows is what an uninterrupted stream would have sent.
 */
class ChunkStream {
  #begun = false;
  #id: string | undefined;
  #muted = false;
  /** The last retry notice that came while the headers were held back, for when they go out. */
  #notice: string | undefined;
  readonly #contentJson: (content: string) => string;
  constructor(
    private readonly run: RunControl,
    readonly sse: SseWriter,
    private readonly meta: CompletionMeta,
    private readonly includeUsage: boolean,
  ) {
    this.#contentJson = contentChunkJson(meta);
  }

  /**
   * A provider retry, as a comment line. `openNow` (Agentry's own clients, which read it) opens
   * a stream whose headers are still held back; for any other client the notice waits for the
   * headers, and one that the answer's first text overtook is dropped (it would be stale).
   */
  retry(event: { attempt: number; of: number; reason: string }, openNow: boolean): void {
    if (this.#muted) return;
    const comment = retryComment(event);
    if (!this.sse.opened && !openNow) {
      this.#notice = comment;
      return;
    }
    this.begin();
    this.sse.comment(comment);
  }

  /** The bound opened the stream: the role chunk, then the notice held back (if any). */
  timedOpen(): void {
    this.begin();
    if (this.#notice !== undefined) this.sse.comment(this.#notice);
    this.#notice = undefined;
  }

  /** What comes next belongs to the run event `id` (undefined: to none, e.g. a stored ending); `muted`: the client has it. */
  at(id: string | undefined, muted: boolean): void {
    this.#id = id;
    this.#muted = muted;
  }

  /** The first event of the run is in: the stream starts with the assistant's role. */
  begin(): void {
    if (this.#begun) return;
    this.#begun = true;
    if (!this.#muted) this.sse.send(chunk(this.meta, { role: 'assistant', content: '' }));
  }

  delta(delta: Record<string, unknown>): void {
    this.#notice = undefined;
    this.begin();
    if (!this.#muted) this.sse.send(chunk(this.meta, delta), this.#id);
  }

  /** A text delta: the one chunk every relayed token makes, written from its template. */
  text(content: string): void {
    this.#notice = undefined;
    this.begin();
    if (!this.#muted) this.sse.sendJson(this.#contentJson(content), this.#id);
  }

  finish(finishReason: string, usage: DoneEvent['usage'] | null, toolCalls?: DoneEvent['toolCalls']): void {
    this.run.settle();
    this.begin();
    if (!this.#muted) {
      toolCalls?.forEach((call, index) => this.sse.send(chunk(this.meta, toolCallDelta(call, index))));
      this.sse.send(chunk(this.meta, { content: '' }, finishReason));
      if (this.includeUsage) this.sse.send(usageChunk(this.meta, usage));
    }
    // A resume after the last event still ends as a stream does.
    this.sse.done(this.#id);
  }

  /** Throws `error` while the headers are not out; otherwise tells it in-stream. */
  fail(error: AppError, eventStatus: number | undefined): void {
    this.run.settle();
    if (!this.sse.opened) throw error;
    this.sse.send(streamError(error.message, eventStatus), this.#id);
  }
}

/** The next relay step; a gap in the events cancels the run and becomes a failure. */
async function nextStep(run: RunControl, relay: RunRelay): Promise<Awaited<ReturnType<RunRelay['next']>> | { type: 'gap'; message: string }> {
  try {
    return await relay.next();
  } catch (err) {
    if (!(err instanceof EventGapError)) throw err;
    await run.cancel(`event stream gap: ${err.detail}`);
    return { type: 'gap', message: err.message };
  }
}

/**
 * Writes the run's events as OpenAI `chat.completion.chunk` SSE lines (AG-UI tool events with
 * `agui`). Throws the run's failure as an HTTP error when it comes before the stream opened.
 */
export async function streamCompletion(
  run: RunControl,
  req: FastifyRequest,
  reply: FastifyReply,
  relay: RunRelay,
  meta: CompletionMeta,
  opts: {
    agui: boolean;
    includeUsage: boolean;
    heartbeatMs: number;
    headersAfterMs?: number;
    /** Resuming: the seq of the last event the client has (its chunks are not sent again). */
    after?: number;
    /** A retry notice opens a held-back stream (Agentry's own clients, which show it; see ChunkStream.retry). */
    openOnRetry?: boolean;
  },
): Promise<void> {
  const after = opts.after ?? -1;
  const sse = new SseWriter(reply.raw, {
    requestId: String(req.id),
    headers: () => reply.getHeaders(),
    heartbeatMs: opts.heartbeatMs,
    headersAfterMs: opts.headersAfterMs,
    onOpen: () => reply.hijack(),
    // A stream opened by the bound starts as it always did, with the role, for clients that wait for a chunk.
    onTimedOpen: () => out.timedOpen(),
  });
  const out = new ChunkStream(run, sse, meta, opts.includeUsage);
  // The text since the last tool event: what a stored answer must start with to be completed.
  let sinceTool = '';
  try {
    for (;;) {
      const next = await nextStep(run, relay);
      if (next.type === 'closed') {
        if (!sse.opened) reply.hijack();
        return;
      }
      if (next.type === 'gap') return out.fail(new AppError('RUN_FAILED', 503, next.message), 503);
      if (next.type === 'ended') {
        // Its last events were lost (see RunRelay): end from what is stored.
        out.at(undefined, false);
        const ending = storedEnding(next.run, sinceTool);
        if ('error' in ending) return out.fail(new AppError('RUN_FAILED', ending.status, ending.error), ending.status);
        if (ending.rest) out.text(ending.rest);
        return out.finish('stop', (next.run?.usage ?? null) as DoneEvent['usage'] | null);
      }
      const event: RunEvent = next.event;
      // A failure is told even to a client that resumes after its seq (a take-over's error may carry any).
      out.at(`${run.runId}:${event.seq}`, event.type !== 'error' && event.seq <= after);
      if (event.type === 'tool_start' || event.type === 'tool_result') sinceTool = '';
      switch (event.type) {
        case 'text':
          sinceTool += event.text;
          out.text(event.text);
          break;
        case 'tool_start':
          if (opts.agui) out.delta(aguiToolStart(event));
          else out.begin();
          break;
        case 'tool_result':
          if (opts.agui) out.delta(aguiToolResult(event));
          else out.begin();
          break;
        case 'retry':
          out.retry(event, opts.openOnRetry === true);
          break;
        case 'error':
          return out.fail(runFailure(event.message, event.status), event.status);
        case 'done':
          return out.finish(event.finishReason, event.usage ?? null, event.toolCalls);
        default: {
          const never: never = event;
          req.log.warn({ event: never }, 'unknown run event');
        }
      }
    }
  } finally {
    sse.end();
  }
}
