import type { Logger } from 'pino';
import { startPeriodic, type PeriodicPass, type Registry } from '@agentry/runtime';
import type { Bus } from '@agentry/bus';
import { listUnfinishedRuns, type Db } from '@agentry/db';
import { enqueueRun } from '@agentry/runs';

/** Runs the sweep enqueues again per pass at most. */
const SWEEP_BATCH = 100;

/**
 * Enqueues again, every `reliability.run_sweep_ms`, runs still queued or running long after they
 * were created: a job lost or given up while a backend was away. The job id is the run id, so a
 * run whose job still waits or runs is left alone, and so is one running in this process (a job
 * that failed for good is not kept, so it cannot hold the id).
 */
export class RunSweeper {
  #pass: PeriodicPass | undefined;

  constructor(
    private readonly deps: {
      db: Db;
      queue: Bus['queue'];
      logger: Logger;
      metrics?: Registry;
      /** `worker.stall_timeout_ms` and `reliability.run_sweep_ms`, read at each pass. */
      timing: () => { stallMs: number; sweepMs: number };
      isRunningHere: (runId: string) => boolean;
    },
  ) {}

  start(): void {
    this.#pass ??= startPeriodic({
      name: 'run-sweep',
      everyMs: () => this.deps.timing().sweepMs,
      logger: this.deps.logger,
      metrics: this.deps.metrics,
      pass: () => this.sweep(),
    });
  }

  async stop(): Promise<void> {
    await this.#pass?.stop();
  }

  async sweep(): Promise<void> {
    const { stallMs, sweepMs } = this.deps.timing();
    // Older than a stall period: a run whose job is merely waiting for a stall check is not touched.
    const stale = await listUnfinishedRuns(this.deps.db, { olderThanMs: Math.max(stallMs, sweepMs), limit: SWEEP_BATCH });
    let enqueued = 0;
    for (const run of stale) {
      if (this.deps.isRunningHere(run.id)) continue;
      await enqueueRun(this.deps.queue, run.id);
      enqueued += 1;
    }
    // Debug, not the helper's info line: a run whose job still exists is counted here but left alone by the queue.
    if (enqueued > 0) this.deps.logger.debug({ runs: enqueued }, 'sweep: unfinished runs enqueued again (a run whose job exists is left alone)');
  }
}
