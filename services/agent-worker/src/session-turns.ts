import type { Logger } from 'pino';
import { hasEarlierActiveRun, type Db } from '@agentry/db';
import { retryWhileDbDown } from '@agentry/engine';

/**
 * Turns of one session run one at a time in arrival order (the run's `seq`): a turn waits while
 * an earlier one is queued or running, looking again when a run of this process ends or every
 * `pollMs` (an earlier turn may run on another worker).
 */
export class SessionTurnGate {
  readonly #finished = new EventTarget();

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly pollMs: number,
  ) {}

  /** Resolves when no earlier turn of the session is active, or when `signal` aborts. */
  async waitForTurn(sessionId: string, seq: number, signal: AbortSignal): Promise<void> {
    while (await retryWhileDbDown(this.logger, 'session turn check', () => hasEarlierActiveRun(this.db, sessionId, seq))) {
      if (signal.aborted) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.#finished.removeEventListener('finished', done);
          resolve();
        };
        const t = setTimeout(done, this.pollMs);
        this.#finished.addEventListener('finished', done);
      });
    }
  }

  /** A run of this process ended: waiting turns look again now. */
  runEnded(): void {
    this.#finished.dispatchEvent(new Event('finished'));
  }
}
