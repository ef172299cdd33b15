import type { RunEvent } from '@agentry/contracts';

/**
 * The relay lost an event (a gap in `seq`): the answer cannot be trusted, so the stream fails.
 * The message is for the person reading the answer; `detail` (the seqs) is for the logs.
 */
export class EventGapError extends Error {
  constructor(readonly detail: string) {
    super('part of the answer was lost on its way from the worker (its connection to the event bus dropped), so the run was stopped; please retry');
  }
}

/**
 * Events of one run as an async queue, checked for order: each event must carry the next `seq`.
 * Redis pub/sub delivers in order per channel but may drop messages across a reconnect; a gap
 * fails the relay cleanly rather than emit a corrupted answer.
 */
export class RunEventQueue {
  #buffer: RunEvent[] = [];
  #waiter: ((e: RunEvent | EventGapError) => void) | null = null;
  #expected: number;
  #failed: EventGapError | null = null;

  /** `firstSeq`: the seq of the first event to come (0 but for a resume from a trimmed log). */
  constructor(firstSeq = 0) {
    this.#expected = firstSeq;
  }

  /** The seq the next event must carry. */
  get expected(): number {
    return this.#expected;
  }

  push(event: RunEvent): void {
    if (this.#failed) return;
    // A terminal error is accepted at any seq: it ends the answer, so nothing can be corrupted,
    // and a worker that takes over a dead worker's run cannot know how far that one had got.
    if (event.type === 'error') {
      this.#deliver(event);
      return;
    }
    // A retry notice consumes no seq (it carries the next one): passed on, not counted.
    if (event.type === 'retry') {
      this.#deliver(event);
      return;
    }
    if (event.seq !== this.#expected) {
      this.#failed = new EventGapError(`run events arrived out of order (expected ${this.#expected}, got ${event.seq})`);
      this.#deliver(this.#failed);
      return;
    }
    this.#expected++;
    this.#deliver(event);
  }

  #deliver(item: RunEvent | EventGapError): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = null;
      w(item);
    } else if (!(item instanceof EventGapError)) {
      this.#buffer.push(item);
    }
  }

  /** An event already here, without waiting (undefined when none is, or after a gap). */
  poll(): RunEvent | undefined {
    return this.#buffer.shift();
  }

  /** The next event; rejects with EventGapError after a gap. */
  next(): Promise<RunEvent> {
    const item = this.#buffer.shift();
    if (item) return Promise.resolve(item);
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      this.#waiter = (e) => (e instanceof EventGapError ? reject(e) : resolve(e));
    });
  }
}
