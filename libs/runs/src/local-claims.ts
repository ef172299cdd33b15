import type { RunRecord } from '@agentry/db';

const byQueue = new WeakMap<object, LocalClaims>();

/**
 * Runs claimed by their own insert, handed to the worker of the same process (embedded mode:
 * the in-process queue's jobs are only ever run here). The worker's claim was a statement of
 * three and a half per chat run on PGlite (docs/benchmarks.md, "Issue 39: embedded mode, the
 * claim folded into the insert"); the insert writes the row `running` with its first attempt
 * instead, and the job's handler takes the inserted row from here rather than claiming it.
 *
 * Only while a worker of this process has a free run slot (`serve`): a run inserted claimed
 * starts at once, so its status and `started_at` say what they said before. What the process
 * holds here dies with it: a run left `running` by a crash is the sweep's after a restart, and
 * claimed again there (attempts 2) as any run its worker died with. A retried job, or a run
 * cancelled before its job was picked up (`drop`), finds nothing here and claims as before.
 */
export class LocalClaims {
  readonly #handed = new Map<string, RunRecord>();
  #freeSlots: (() => number) | undefined;

  private constructor() {}

  /** The one registry per job queue (per process; a test's bus gets its own). */
  static of(queue: object): LocalClaims {
    let claims = byQueue.get(queue);
    if (!claims) {
      claims = new LocalClaims();
      byQueue.set(queue, claims);
    }
    return claims;
  }

  /**
   * The worker of this process consumes the queue in-process, with `freeSlots()` run slots free
   * right now. Returns the function that stops it (the worker's shutdown): runs are then
   * inserted unclaimed again.
   */
  serve(freeSlots: () => number): () => void {
    this.#freeSlots = freeSlots;
    return () => {
      if (this.#freeSlots === freeSlots) this.#freeSlots = undefined;
    };
  }

  /** Whether a new run may be inserted claimed: a worker here would start it at once. */
  hasRoom(): boolean {
    return this.#freeSlots !== undefined && this.#freeSlots() > this.#handed.size;
  }

  /** A run inserted claimed, for its job's handler; before its job is enqueued. */
  hand(run: RunRecord): void {
    this.#handed.set(run.id, run);
  }

  /** The run as its insert claimed it, once: undefined when it was not, or was taken or dropped already. */
  take(runId: string): RunRecord | undefined {
    const run = this.#handed.get(runId);
    if (run) this.#handed.delete(runId);
    return run;
  }

  /** Forgets a handed run (its job was not enqueued, or it was cancelled): its job, if any, claims it from the row. */
  drop(runId: string): void {
    this.#handed.delete(runId);
  }

  /** Runs handed and not taken yet (tests). */
  get size(): number {
    return this.#handed.size;
  }
}
