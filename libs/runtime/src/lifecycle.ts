import type { Logger } from 'pino';

type Closer = (remainingMs: number) => Promise<void>;

/**
 * Ordered shutdown with one deadline. Resources are registered as they open and closed in
 * reverse (the HTTP listener before the consumers, the consumers before the bus, the bus
 * before the database). Each closer gets the time left; past the deadline the rest are
 * abandoned and shutdown reports failure, so the process can exit non-zero.
 */
export class Lifecycle {
  #closers: Array<{ name: string; close: Closer }> = [];
  #stopping: Promise<boolean> | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly deadlineMs: number,
  ) {}

  add(name: string, close: Closer): void {
    this.#closers.push({ name, close });
  }

  get stopping(): boolean {
    return this.#stopping !== null;
  }

  /** Idempotent: later calls wait for the first. Resolves true when everything closed in time. */
  shutdown(reason: string): Promise<boolean> {
    this.#stopping ??= this.#run(reason);
    return this.#stopping;
  }

  async #run(reason: string): Promise<boolean> {
    const started = Date.now();
    const deadline = started + this.deadlineMs;
    this.logger.info({ reason, deadlineMs: this.deadlineMs }, 'shutting down');
    let ok = true;
    // Set once a closer outlives the deadline: a timer may fire a millisecond before Date.now()
    // reaches the deadline, and the next closer must not then start with that millisecond.
    let expired = false;
    for (const { name, close } of [...this.#closers].reverse()) {
      const remaining = deadline - Date.now();
      if (expired || remaining <= 0) {
        this.logger.error({ resource: name }, 'shutdown deadline passed; not closed');
        ok = false;
        continue;
      }
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), remaining);
      });
      try {
        const result = await Promise.race([close(remaining).then(() => 'closed' as const), timeout]);
        if (result === 'timeout') {
          this.logger.error({ resource: name }, 'shutdown deadline passed while closing');
          ok = false;
          expired = true;
        }
      } catch (err) {
        this.logger.error({ err, resource: name }, 'error while closing');
        ok = false;
      } finally {
        clearTimeout(timer);
      }
    }
    this.logger.info({ ms: Date.now() - started, clean: ok }, 'shutdown complete');
    return ok;
  }
}
