import type { RunEvent } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { isFinalRunStatus, type RunOutcome } from '@agentry/db';
import { WORKER_LOST_MESSAGE, type RelayLease } from './lease.js';
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
  /** The lease's lapse as a wait outcome, made once per lapse promise (a hand-off re-arms it). */
  #lapse: { of: Promise<void>; as: Promise<'lapsed'> } | undefined;
  /**
   * The silence check without a timer per event: one timer per relay, armed for `checkMs` from
   * the start of the wait in progress; when it fires during a later wait it re-arms for what is
   * left of that one, and once no wait is in progress it stops. `#silence` is the promise the
   * waits race, resolved when a wait has lasted `checkMs`.
   */
  #silence: { promise: Promise<'silence'>; resolve: (v: 'silence') => void } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #waitStarted = 0;
  #waitMs = 0;
  #waiting = false;

  constructor(
    private readonly queue: RunEventQueue,
    private readonly opts: {
      readRun: () => Promise<RunOutcome | undefined>;
      checkMs: () => number;
      /** The client went away: `next` returns `closed` and stops reading the run. */
      closed?: AbortSignal;
      /**
       * The run's liveness lease (cluster mode): when it lapses (the worker died) and the run has
       * not ended, `handOff` gives it to another worker; a stream that had events ends with
       * WORKER_LOST_MESSAGE at once, one that had none waits for the re-run.
       */
      lease?: RelayLease;
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
      if (ready) return this.#event(ready);
    }
    const gone = this.#gone;
    const lease = this.opts.lease;
    for (;;) {
      // One pending read of the queue across silences: a new read would leave an event that
      // arrives meanwhile to the abandoned one.
      this.#pending ??= this.queue.next().then((event) => ({ type: 'event', event }));
      const waits: Array<Promise<RelayNext | 'silence' | 'lapsed'>> = [this.#pending, this.#silenceFor(this.opts.checkMs())];
      if (gone) waits.push(gone);
      if (lease) waits.push(this.#lapsed(lease));
      let got: RelayNext | 'silence' | 'lapsed';
      try {
        got = await Promise.race(waits);
      } catch (err) {
        this.#pending = undefined;
        this.#stopTimer();
        throw err;
      } finally {
        this.#waiting = false;
      }
      if (got === 'lapsed' && lease) {
        const after = await this.#onLapse(lease);
        if (after?.type === 'ended') this.#stopTimer();
        if (after) return after;
        continue;
      }
      if (got !== 'silence' && got !== 'lapsed') {
        if (got.type === 'event') {
          this.#pending = undefined;
          return this.#event(got.event);
        }
        this.#stopTimer();
        return got;
      }
      if (this.opts.closed?.aborted) return { type: 'closed' };
      let run: RunOutcome | undefined;
      try {
        run = await this.opts.readRun();
      } catch {
        continue;
      }
      if (!run || isFinalRunStatus(run.status)) {
        this.#stopTimer();
        return { type: 'ended', run };
      }
    }
  }

  /**
   * An event for the caller. After the last one (done, or a failure) the timer goes too: left to
   * fire, it would hold the relay, and through its callbacks the request and the response, for
   * up to `checkMs` after the answer ended.
   */
  #event(event: RunEvent): RelayNext {
    if (event.type === 'done' || event.type === 'error') this.#stopTimer();
    return { type: 'event', event };
  }

  /** The silence of the wait starting now: resolves once it has lasted `ms` (see `#silence`). */
  #silenceFor(ms: number): Promise<'silence'> {
    this.#waiting = true;
    this.#waitStarted = Date.now();
    this.#waitMs = ms;
    if (!this.#silence) {
      let resolve!: (v: 'silence') => void;
      const promise = new Promise<'silence'>((r) => (resolve = r));
      this.#silence = { promise, resolve };
    }
    if (!this.#timer) this.#arm(ms);
    return this.#silence.promise;
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#onTimer(), ms);
    // A relay its caller left without an end (it stopped asking) leaves it to fire once and stop: it must not hold the process.
    this.#timer.unref();
  }

  #onTimer(): void {
    this.#timer = undefined;
    if (!this.#waiting) return;
    const left = this.#waitStarted + this.#waitMs - Date.now();
    if (left > 0) {
      this.#arm(left);
      return;
    }
    const silence = this.#silence;
    this.#silence = undefined;
    silence?.resolve('silence');
  }

  #stopTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #lapsed(lease: RelayLease): Promise<'lapsed'> {
    const of = lease.watch.lapsed();
    if (this.#lapse?.of !== of) this.#lapse = { of, as: of.then(() => 'lapsed' as const) };
    return this.#lapse.as;
  }

  /**
   * The worker stopped renewing the run's lease. A run that ended meanwhile (its worker gave the
   * lease up with its last event, which may still be on its way) ends from its row; otherwise the
   * run goes to another worker, and the client either gets the clean error now (it had events)
   * or keeps waiting for the re-run (it had none). A database that cannot answer is taken as
   * "not ended": the worker is gone either way.
   */
  async #onLapse(lease: RelayLease): Promise<RelayNext | undefined> {
    let run: RunOutcome | undefined | 'unknown';
    try {
      run = await this.opts.readRun();
    } catch {
      run = 'unknown';
    }
    if (run !== 'unknown' && (!run || isFinalRunStatus(run.status))) return { type: 'ended', run };
    // Events of the run seen (by this relay, or kept before a resume): the client has part of the answer.
    const streamed = this.queue.expected > 0;
    await lease.handOff(streamed);
    if (!streamed) {
      lease.watch.reset();
      return undefined;
    }
    this.#pending = undefined;
    return this.#event({ type: 'error', runId: lease.runId, seq: this.queue.expected, message: WORKER_LOST_MESSAGE, status: 503 });
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
