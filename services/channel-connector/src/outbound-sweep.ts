import type { Logger } from 'pino';
import type { Bus } from '@agentry/bus';
import { enqueueOutbound } from '@agentry/channels';
import { listStrandedOutbound, type Db } from '@agentry/db';

/**
 * Every `sweepMs`, enqueues again the messages still queued `sweepGraceMs` past due (their job was
 * lost: a queue outage, a crash between commit and enqueue), so every committed message ends sent
 * or failed. One pass at a time: a slow pass is not overlapped by the next tick. Inbound event ids
 * are not this pass's: the scheduler's retention pass forgets them per
 * `retention.inbound_events_days` (0 keeps them).
 */
export class OutboundSweeper {
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | undefined;

  constructor(
    private readonly deps: {
      db: Db;
      queue: Bus['queue'];
      logger: Logger;
      sweepMs: number;
      sweepGraceMs: number;
    },
  ) {}

  start(): void {
    this.#timer = setInterval(() => {
      this.#sweeping ??= this.sweep()
        .catch((err: unknown) => this.deps.logger.warn({ err }, 'outbound sweep failed'))
        .finally(() => (this.#sweeping = undefined));
    }, this.deps.sweepMs);
    this.#timer.unref();
  }

  /** Stops the timer and waits for a pass under way. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#sweeping;
  }

  async sweep(): Promise<void> {
    const { db, queue, logger } = this.deps;
    const stranded = await listStrandedOutbound(db, this.deps.sweepGraceMs);
    for (const s of stranded) {
      await enqueueOutbound(queue, s.id, { attempt: 10_000 + s.attempts });
    }
    if (stranded.length > 0) logger.info({ count: stranded.length }, 'stranded outbound messages enqueued again');
  }
}
