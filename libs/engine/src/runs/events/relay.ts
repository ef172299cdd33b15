import type { RunEvent } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { isFinalRunStatus, type RunOutcome } from '@agentry/db';
import type { RunEventQueue } from './queue.js';

/**
 * What the relay waits for: the run's next event, or its stored end when the events went quiet
 * (`run` undefined: the row is gone, deleted with its agent or session while it ran).
 */
export type RelayNext = { type: 'event'; event: RunEvent } | { type: 'ended'; run: RunOutcome | undefined } | { type: 'closed' };

/**
 * The events of one run for a relay that must never hang. Run events travel over pub/sub, which
 * is at-most-once: a worker that cannot publish (Redis away) or a subscriber that was
 * disconnected loses them, while the run's outcome is still committed to the database. So after
 * `checkMs()` without an event the run row is read, and a run that has ended is returned as
 * such; one still going (or a database that cannot answer) keeps the wait going. A run whose
 * row is gone has ended too: deleting its agent or session deleted it, and no event will come.
 */
export class RunRelay {
  #pending: Promise<RelayNext> | undefined;
  /** Resolves when the client goes away (one listener for the whole relay). */
  readonly #gone: Promise<RelayNext> | undefined;

  constructor(
    private readonly queue: RunEventQueue,
    private readonly opts: {
      readRun: () => Promise<RunOutcome | undefined>;
      checkMs: () => number;
      /** The client went away: `next` returns `closed` and stops reading the run. */
      closed?: AbortSignal;
    },
  ) {
    const closed = opts.closed;
    this.#gone = closed
      ? new Promise<RelayNext>((resolve) => {
          if (closed.aborted) resolve({ type: 'closed' });
          else closed.addEventListener('abort', () => resolve({ type: 'closed' }), { once: true });
        })
      : undefined;
  }

  /** The next event, or the stored end; rejects like `RunEventQueue.next` after a gap. */
  async next(): Promise<RelayNext> {
    // An event already waiting needs no timer and no race (the common case mid-answer).
    if (this.#pending === undefined) {
      const ready = this.queue.poll();
      if (ready) return { type: 'event', event: ready };
    }
    const gone = this.#gone;
    for (;;) {
      // One pending read of the queue across silences: a new read would leave an event that
      // arrives meanwhile to the abandoned one.
      this.#pending ??= this.queue.next().then((event) => ({ type: 'event', event }));
      let timer: NodeJS.Timeout | undefined;
      const silence = new Promise<'silence'>((resolve) => {
        timer = setTimeout(() => resolve('silence'), this.opts.checkMs());
      });
      let got: RelayNext | 'silence';
      try {
        got = await Promise.race(gone ? [this.#pending, silence, gone] : [this.#pending, silence]);
      } catch (err) {
        this.#pending = undefined;
        throw err;
      } finally {
        clearTimeout(timer);
      }
      if (got !== 'silence') {
        if (got.type !== 'closed') this.#pending = undefined;
        return got;
      }
      if (this.opts.closed?.aborted) return { type: 'closed' };
      let run: RunOutcome | undefined;
      try {
        run = await this.opts.readRun();
      } catch {
        continue;
      }
      if (!run || isFinalRunStatus(run.status)) return { type: 'ended', run };
    }
  }
}

/**
 * How a stream whose events were lost ends, from the stored run: the rest of a succeeded
 * answer when what the client already has (the text since the last tool event) is the start of
 * the stored output, else an error; the stored error of a failed run; 404 for a deleted run.
 */
export function storedEnding(run: RunOutcome | undefined, relayedSinceTool: string): { rest: string } | { error: string; status: number } {
  if (!run) {
    const gone = new Errors.NOT_FOUND('the run was deleted while it ran (its agent or its session was deleted)');
    return { error: gone.message, status: gone.status };
  }
  if (run.status === 'succeeded') {
    const output = run.output ?? '';
    if (output.startsWith(relayedSinceTool)) return { rest: output.slice(relayedSinceTool.length) };
    return { error: 'part of the answer was lost on its way from the worker; please retry', status: 503 };
  }
  if (run.status === 'cancelled') return { error: 'the run was cancelled before it finished; please retry', status: 503 };
  return { error: run.error ?? 'the run failed', status: 502 };
}
