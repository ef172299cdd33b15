import type { RunEvent } from '@agentry/contracts';

/** Distributes `Omit` over a union (plain `Omit` collapses it). */
export type EventBody = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'runId' | 'seq'> : never) : never;

/**
 * The ordered events of one run on `run:<id>`: seq from 0 and contiguous. Text deltas are
 * coalesced without a timer: the first goes out at once, and deltas that arrive while a publish
 * is still in flight are joined into the next `text` event, so a fast model sends Redis one
 * message per round trip rather than one per token while a slow one still sends every token
 * as it comes. Any other event first waits for the text before it (order is kept).
 */
export class RunEventPublisher {
  #seq = 0;
  #pending = '';
  #inFlight: Promise<void> | undefined;
  #failed: { err: unknown } | undefined;

  constructor(
    private readonly runId: string,
    private readonly publish: (event: RunEvent) => Promise<void>,
  ) {}

  /** Queues a text delta and returns at once; throws when an earlier publish failed. */
  text(text: string): void {
    if (this.#failed) throw this.#failed.err;
    if (text === '') return;
    this.#pending += text;
    if (!this.#inFlight) {
      const pump = this.#pump();
      // The pump clears #inFlight when it ends, which may already have happened (a publish that throws at once).
      if (this.#pumping) this.#inFlight = pump;
    }
  }

  #pumping = false;

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#pending !== '') {
        const text = this.#pending;
        this.#pending = '';
        await this.publish({ type: 'text', text, runId: this.runId, seq: this.#seq++ });
      }
    } catch (err) {
      this.#failed ??= { err };
      this.#pending = '';
    } finally {
      this.#pumping = false;
      this.#inFlight = undefined;
    }
  }

  /** Waits until every queued delta is published; throws when one failed. */
  async flush(): Promise<void> {
    while (this.#inFlight) await this.#inFlight;
    if (this.#failed) throw this.#failed.err;
  }

  /**
   * Publishes a `retry` notice after the text queued before it, without consuming a seq: it
   * carries the seq of the event that follows, as it is no part of the answer (the queue passes
   * it without counting it, and a take-over or resume never takes it for output).
   */
  async notice(body: Extract<EventBody, { type: 'retry' }>): Promise<void> {
    await this.flush();
    await this.publish({ ...body, runId: this.runId, seq: this.#seq });
  }

  /** Publishes one event after the text queued before it. */
  async event(body: EventBody): Promise<void> {
    await this.flush();
    await this.publish({ ...body, runId: this.runId, seq: this.#seq++ } as RunEvent);
  }
}
