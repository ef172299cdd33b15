import type { Logger } from 'pino';
import { startPeriodic, type PeriodicPass, type Registry } from '@agentry/runtime';
import type { Bus } from '@agentry/bus';
import { enqueueOutbound } from '@agentry/channels';
import { listStrandedOutbound, type Db } from '@agentry/db';

/**
 * Every `sweepMs`, enqueues again the messages still queued `sweepGraceMs` past due (their job was
 * lost: a queue outage, a crash between commit and enqueue), so every committed message ends sent
 * or failed. The timing (one pass at a time, jitter, deadline, log line) is startPeriodic's. Inbound event ids
 * are not this pass's: the scheduler's retention pass forgets them per
 * `retention.inbound_events_days` (0 keeps them).
 */
export class OutboundSweeper {
  #pass: PeriodicPass | undefined;

  constructor(
    private readonly deps: {
      db: Db;
      queue: Bus['queue'];
      logger: Logger;
      metrics?: Registry;
      sweepMs: number;
      sweepGraceMs: number;
    },
  ) {}

  start(): void {
    this.#pass = startPeriodic({
      name: 'outbound-sweep',
      everyMs: () => this.deps.sweepMs,
      logger: this.deps.logger,
      metrics: this.deps.metrics,
      pass: () => this.sweep(),
    });
  }

  /** Stops the timer and waits for a pass under way. */
  async stop(): Promise<void> {
    await this.#pass?.stop();
  }

  /** One pass; what it enqueued again is logged by the periodic helper. */
  async sweep(): Promise<{ enqueuedAgain: number }> {
    const { db, queue } = this.deps;
    const stranded = await listStrandedOutbound(db, this.deps.sweepGraceMs);
    for (const s of stranded) {
      await enqueueOutbound(queue, s.id, { attempt: 10_000 + s.attempts });
    }
    return { enqueuedAgain: stranded.length };
  }
}
