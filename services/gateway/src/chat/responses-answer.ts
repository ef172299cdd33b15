import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '@agentry/contracts';
import { AppError, Errors } from '@agentry/errors';
import { EventGapError, storedEnding, type RunRelay } from '@agentry/runs';
import type { ChatRun, RunControl } from './chat-run.js';
import { retryComment, SseWriter } from './sse-writer.js';
import type { DoneEvent } from './openai-chunks.js';
import { ResponseEvents, responseObject, type ResponseMeta } from './responses-events.js';

/**
 * The two shapes of a Responses API answer, read from a run's relay like chat completions
 * (openai-answer.ts): one `Response` body, or its SSE events. A run that fails before any output
 * is an HTTP error status in both; once a stream is open it ends with `response.failed`.
 */

type Step = { kind: 'event'; event: RunEvent } | { kind: 'closed' } | { kind: 'ended'; rest: string; usage: DoneEvent['usage'] | null; completedAt?: number } | { kind: 'failed'; message: string; status: number };

/** The relay's next step, with a gap (the run is cancelled) and a stored ending told as steps. */
async function nextStep(run: RunControl, relay: RunRelay, sinceTool: string): Promise<Step> {
  try {
    const next = await relay.next();
    if (next.type === 'closed') return { kind: 'closed' };
    if (next.type === 'event') return { kind: 'event', event: next.event };
    // Its last events were lost (see RunRelay): end from what is stored.
    const ending = storedEnding(next.run, sinceTool);
    if ('error' in ending) return { kind: 'failed', message: ending.error, status: ending.status };
    const finished = next.run?.finishedAt;
    return { kind: 'ended', rest: ending.rest, usage: (next.run?.usage ?? null) as DoneEvent['usage'] | null, ...(finished ? { completedAt: Math.floor(finished.getTime() / 1000) } : {}) };
  } catch (err) {
    if (!(err instanceof EventGapError)) throw err;
    await run.cancel(`event stream gap: ${err.detail}`);
    return { kind: 'failed', message: err.message, status: 503 };
  }
}

const runFailed = (status: number | undefined, message: string) => new AppError('RUN_FAILED', status && status >= 400 ? status : 502, message);

/** The non-stream answer: the text events joined into one output message, with the run's usage. */
export async function awaitResponse(run: ChatRun, reply: FastifyReply, relay: RunRelay, meta: ResponseMeta): Promise<unknown> {
  let text = '';
  for (;;) {
    const step = await nextStep(run, relay, '');
    if (step.kind === 'closed') {
      // Nobody reads the answer any more (the close handler has cancelled the run): send nothing.
      reply.hijack();
      return reply;
    }
    if (step.kind === 'failed') {
      run.settle();
      throw step.status === 500 ? new Errors.INTERNAL(step.message) : runFailed(step.status, step.message);
    }
    if (step.kind === 'ended') {
      run.settle();
      // Nothing was relayed since '' was passed: the stored output is the whole answer.
      return responseObject(meta, { status: 'completed', text: step.rest, usage: step.usage, ...(step.completedAt ? { completedAt: step.completedAt } : {}) });
    }
    const event = step.event;
    if (event.type === 'text') text += event.text;
    else if (event.type === 'error') {
      run.settle();
      throw runFailed(event.status, event.message);
    } else if (event.type === 'done') {
      run.settle();
      return responseObject(meta, { status: 'completed', text, usage: event.usage, ...(event.toolCalls ? { calls: event.toolCalls } : {}), ...(event.finishedAt ? { completedAt: event.finishedAt } : {}) });
    }
  }
}

/**
 * The SSE side of one streamed response. Nothing is written (no status line either) until the
 * run's first output or the keep-alive bound: until then a failure is still an HTTP error status,
 * as for a non-stream request; after it, `response.failed`.
 *
 * As with chat chunks, the last SSE event a run event made carries its id (`<runId>:<seq>`), and
 * a resumed stream goes through the events the client has muted: their `sequence_number`s are
 * still counted, so the resumed events number on from where the client stopped.
 */
class ResponseStream {
  readonly events: ResponseEvents;
  #sse: SseWriter | undefined;
  #messageBegun = false;
  #id: string | undefined;
  #muted = false;
  text = '';

  constructor(
    private readonly req: FastifyRequest,
    private readonly reply: FastifyReply,
    meta: ResponseMeta,
    private readonly heartbeatMs: number,
    /** The `sequence_number` of the last event the client has (`starting_after`); -1: none. */
    private readonly startingAfter = -1,
  ) {
    this.events = new ResponseEvents(meta);
  }

  get open(): boolean {
    return this.#sse !== undefined;
  }

  /** What comes next belongs to the run event `id` (undefined: to none); `muted`: the client has it. */
  at(id: string | undefined, muted: boolean): void {
    this.#id = id;
    this.#muted = muted;
  }

  /** Status line, headers, `response.created` and `response.in_progress`; once. */
  openStream(): void {
    if (this.#sse) return;
    this.reply.hijack();
    this.#sse = new SseWriter(this.reply.raw, { requestId: String(this.req.id), headers: () => this.reply.getHeaders(), heartbeatMs: this.heartbeatMs });
    this.#send(this.events.created());
    this.#send(this.events.inProgress());
  }

  delta(text: string): void {
    this.#beginMessage();
    if (text === '') return;
    this.text += text;
    this.#send(this.events.textDelta(text), this.#id);
  }

  /** Ends the message (begun now if nothing was said, unless the model only called the client's tools), then the calls. */
  complete(usage: DoneEvent['usage'] | null | undefined, calls?: DoneEvent['toolCalls'], completedAt?: number): void {
    this.openStream();
    const message = this.#messageBegun || !calls?.length;
    if (message) {
      this.#beginMessage();
      this.#send(this.events.textDone(this.text));
      this.#send(this.events.partDone(this.text));
      this.#send(this.events.itemDone(this.text));
    }
    // A message is begun by text only (text events are never empty), so it is in the final output too.
    (calls ?? []).forEach((call, i) => this.events.functionCall(call, i + (message ? 1 : 0)).forEach((e) => this.#send(e)));
    this.#send(this.events.completed(this.text, usage, calls, completedAt), this.#id);
  }

  /** A provider retry as a comment line, once the stream is open (Responses clients skip comments). */
  retry(event: { attempt: number; of: number; reason: string }): void {
    if (this.#sse && !this.#muted) this.#sse.comment(retryComment(event));
  }

  fail(message: string): void {
    if (this.#sse) this.#send(this.events.failed(this.#messageBegun ? this.text : null, message), this.#id);
  }

  end(): void {
    this.#sse?.end();
  }

  /** Numbered whether or not it is written: a muted event still takes its sequence number. */
  #send(event: { type: string; sequence_number: number }, id?: string): void {
    if (!this.#muted && event.sequence_number > this.startingAfter) this.#sse!.send(event, id, event.type);
  }

  #beginMessage(): void {
    this.openStream();
    if (this.#messageBegun) return;
    this.#messageBegun = true;
    this.#send(this.events.itemAdded());
    this.#send(this.events.partAdded());
  }
}

export interface StreamResponseOptions {
  heartbeatMs: number;
  /** Resuming: the seq of the last event the client has (what it made is not sent again). */
  after?: number;
  /**
   * Replaying (`GET /responses/{id}?stream=true`): the `sequence_number` of the last event the
   * client has; the events up to it are made (numbering on) but not sent. -1: all are sent.
   */
  startingAfter?: number;
}

/** Writes the run as Responses API SSE events; answers an HTTP error instead while nothing is out. */
export async function streamResponse(run: RunControl, req: FastifyRequest, reply: FastifyReply, relay: RunRelay, meta: ResponseMeta, opts: StreamResponseOptions): Promise<unknown> {
  const after = opts.after ?? -1;
  const out = new ResponseStream(req, reply, meta, opts.heartbeatMs, opts.startingAfter);
  // A resumed stream's opening events (created, in_progress) are the client's already.
  out.at(undefined, after >= 0);
  // A run that thinks for long (tools, a slow model) must not leave proxies with a silent socket;
  // a resumed one opens at once (the client has had its status line).
  const keepAlive = setTimeout(() => out.openStream(), after >= 0 || opts.startingAfter !== undefined ? 0 : opts.heartbeatMs);
  // The text since the last tool event: what a stored answer must start with to be completed.
  let sinceTool = '';
  const fail = (message: string, status: number | undefined) => {
    run.settle();
    if (!out.open) throw status === 500 ? new Errors.INTERNAL(message) : runFailed(status, message);
    out.fail(message);
    return reply;
  };
  try {
    for (;;) {
      const step = await nextStep(run, relay, sinceTool);
      if (step.kind === 'closed') {
        if (!out.open) reply.hijack();
        return reply;
      }
      if (step.kind === 'failed') {
        out.at(undefined, false);
        return fail(step.message, step.status);
      }
      if (step.kind === 'ended') {
        out.at(undefined, false);
        run.settle();
        out.delta(step.rest);
        out.complete(step.usage, undefined, step.completedAt);
        return reply;
      }
      const event = step.event;
      // A failure is told even to a client that resumes after its seq (a take-over's error may carry any).
      out.at(`${run.runId}:${event.seq}`, event.type !== 'error' && event.seq <= after);
      switch (event.type) {
        case 'text':
          sinceTool += event.text;
          out.delta(event.text);
          break;
        case 'tool_start':
        case 'tool_result':
          // Tool calls are the agent's own business here: the client sees the answer text.
          sinceTool = '';
          break;
        case 'retry':
          out.retry(event);
          break;
        case 'error':
          return fail(event.message, event.status);
        case 'done':
          run.settle();
          out.complete(event.usage, event.toolCalls, event.finishedAt);
          return reply;
        default: {
          const never: never = event;
          req.log.warn({ event: never }, 'unknown run event');
        }
      }
    }
  } finally {
    clearTimeout(keepAlive);
    out.end();
  }
}
