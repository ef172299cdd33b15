import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '@agentry/contracts';
import { AppError, Errors } from '@agentry/errors';
import { EventGapError, storedEnding, type RunRelay } from '@agentry/engine';
import type { ChatRun } from './chat-run.js';
import { SseWriter } from './sse-writer.js';
import type { DoneEvent } from './openai-chunks.js';
import { ResponseEvents, responseObject, type ResponseMeta } from './responses-events.js';

/**
 * The two shapes of a Responses API answer, read from a run's relay like chat completions
 * (openai-answer.ts): one `Response` body, or its SSE events. A run that fails before any output
 * is an HTTP error status in both; once a stream is open it ends with `response.failed`.
 */

type Step = { kind: 'event'; event: RunEvent } | { kind: 'closed' } | { kind: 'ended'; rest: string; usage: DoneEvent['usage'] | null } | { kind: 'failed'; message: string; status: number };

/** The relay's next step, with a gap (the run is cancelled) and a stored ending told as steps. */
async function nextStep(run: ChatRun, relay: RunRelay, sinceTool: string): Promise<Step> {
  try {
    const next = await relay.next();
    if (next.type === 'closed') return { kind: 'closed' };
    if (next.type === 'event') return { kind: 'event', event: next.event };
    // Its last events were lost (see RunRelay): end from what is stored.
    const ending = storedEnding(next.run, sinceTool);
    if ('error' in ending) return { kind: 'failed', message: ending.error, status: ending.status };
    return { kind: 'ended', rest: ending.rest, usage: (next.run?.usage ?? null) as DoneEvent['usage'] | null };
  } catch (err) {
    if (!(err instanceof EventGapError)) throw err;
    await run.cancel('event stream gap');
    return { kind: 'failed', message: err.message, status: 500 };
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
      return responseObject(meta, { status: 'completed', text: step.rest, usage: step.usage });
    }
    const event = step.event;
    if (event.type === 'text') text += event.text;
    else if (event.type === 'error') {
      run.settle();
      throw runFailed(event.status, event.message);
    } else if (event.type === 'done') {
      run.settle();
      return responseObject(meta, { status: 'completed', text, usage: event.usage });
    }
  }
}

/**
 * The SSE side of one streamed response. Nothing is written (no status line either) until the
 * run's first output or the keep-alive bound: until then a failure is still an HTTP error status,
 * as for a non-stream request; after it, `response.failed`.
 */
class ResponseStream {
  readonly events: ResponseEvents;
  #sse: SseWriter | undefined;
  #messageBegun = false;
  text = '';

  constructor(
    private readonly req: FastifyRequest,
    private readonly reply: FastifyReply,
    meta: ResponseMeta,
    private readonly heartbeatMs: number,
  ) {
    this.events = new ResponseEvents(meta);
  }

  get open(): boolean {
    return this.#sse !== undefined;
  }

  /** Status line, headers, `response.created` and `response.in_progress`; once. */
  openStream(): void {
    if (this.#sse) return;
    this.reply.hijack();
    this.#sse = new SseWriter(this.reply.raw, { requestId: String(this.req.id), heartbeatMs: this.heartbeatMs });
    this.#sse.send(this.events.created());
    this.#sse.send(this.events.inProgress());
  }

  delta(text: string): void {
    this.#beginMessage();
    if (text === '') return;
    this.text += text;
    this.#sse!.send(this.events.textDelta(text));
  }

  complete(usage: DoneEvent['usage'] | null | undefined): void {
    this.#beginMessage();
    const sse = this.#sse!;
    sse.send(this.events.textDone(this.text));
    sse.send(this.events.partDone(this.text));
    sse.send(this.events.itemDone(this.text));
    sse.send(this.events.completed(this.text, usage));
  }

  fail(message: string): void {
    this.#sse?.send(this.events.failed(this.#messageBegun ? this.text : null, message));
  }

  end(): void {
    this.#sse?.end();
  }

  #beginMessage(): void {
    this.openStream();
    if (this.#messageBegun) return;
    this.#messageBegun = true;
    this.#sse!.send(this.events.itemAdded());
    this.#sse!.send(this.events.partAdded());
  }
}

/** Writes the run as Responses API SSE events; answers an HTTP error instead while nothing is out. */
export async function streamResponse(
  run: ChatRun,
  req: FastifyRequest,
  reply: FastifyReply,
  relay: RunRelay,
  meta: ResponseMeta,
  opts: { heartbeatMs: number },
): Promise<unknown> {
  const out = new ResponseStream(req, reply, meta, opts.heartbeatMs);
  // A run that thinks for long (tools, a slow model) must not leave proxies with a silent socket.
  const keepAlive = setTimeout(() => out.openStream(), opts.heartbeatMs);
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
      if (step.kind === 'failed') return fail(step.message, step.status);
      if (step.kind === 'ended') {
        run.settle();
        out.delta(step.rest);
        out.complete(step.usage);
        return reply;
      }
      const event = step.event;
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
        case 'error':
          return fail(event.message, event.status);
        case 'done':
          run.settle();
          out.complete(event.usage);
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
