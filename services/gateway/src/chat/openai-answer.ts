import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '@agentry/contracts';
import { AppError, Errors } from '@agentry/errors';
import type { RunOutcome } from '@agentry/db';
import type { ChatRun } from './chat-run.js';
import { EventGapError, storedEnding, type RunRelay } from '@agentry/engine';
import { SseWriter } from './sse-writer.js';
import { aguiToolResult, aguiToolStart, chunk, completion, streamError, usageChunk, type CompletionMeta, type DoneEvent } from './openai-chunks.js';

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
        await run.cancel('event stream gap');
        throw new Errors.INTERNAL(err.message);
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
      throw new AppError('RUN_FAILED', event.status && event.status >= 400 ? event.status : 502, event.message);
    } else if (event.type === 'done') {
      run.settle();
      return completion(meta, content, event.finishReason, event.usage);
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

/** Writes the run's events as OpenAI `chat.completion.chunk` SSE lines (AG-UI tool events with `agui`). */
export async function streamCompletion(
  run: ChatRun,
  req: FastifyRequest,
  reply: FastifyReply,
  relay: RunRelay,
  meta: CompletionMeta,
  opts: { agui: boolean; includeUsage: boolean; heartbeatMs: number },
): Promise<void> {
  reply.hijack();
  const sse = new SseWriter(reply.raw, { requestId: String(req.id), heartbeatMs: opts.heartbeatMs });
  // The text since the last tool event: what a stored answer must start with to be completed.
  let sinceTool = '';
  const finish = (finishReason: string, usage: DoneEvent['usage'] | null) => {
    run.settle();
    sse.send(chunk(meta, { content: '' }, finishReason));
    if (opts.includeUsage) sse.send(usageChunk(meta, usage));
    sse.done();
  };
  try {
    sse.send(chunk(meta, { role: 'assistant', content: '' }));
    for (;;) {
      let event: RunEvent;
      try {
        const next = await relay.next();
        if (next.type === 'closed') return;
        if (next.type === 'ended') {
          // Its last events were lost (see RunRelay): end from what is stored.
          const ending = storedEnding(next.run, sinceTool);
          if ('error' in ending) {
            run.settle();
            sse.send(streamError(ending.error, ending.status));
            return;
          }
          if (ending.rest) sse.send(chunk(meta, { content: ending.rest }));
          finish('stop', (next.run?.usage ?? null) as DoneEvent['usage'] | null);
          return;
        }
        event = next.event;
      } catch (err) {
        if (!(err instanceof EventGapError)) throw err;
        await run.cancel('event stream gap');
        sse.send(streamError(err.message, 500));
        return;
      }
      if (event.type === 'tool_start' || event.type === 'tool_result') sinceTool = '';
      switch (event.type) {
        case 'text':
          sinceTool += event.text;
          sse.send(chunk(meta, { content: event.text }));
          break;
        case 'tool_start':
          if (opts.agui) sse.send(chunk(meta, aguiToolStart(event)));
          break;
        case 'tool_result':
          if (opts.agui) sse.send(chunk(meta, aguiToolResult(event)));
          break;
        case 'error':
          run.settle();
          // A failure after the stream started: one error event, then the stream closes without [DONE].
          sse.send(streamError(event.message, event.status));
          return;
        case 'done':
          finish(event.finishReason, event.usage ?? null);
          return;
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
