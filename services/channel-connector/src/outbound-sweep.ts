import type { Logger } from 'pino';
import type { Bus } from '@agentry/bus';
import { enqueueOutbound } from '@agentry/channels';
import { listStrandedOutbound, pruneInboundEvents, type Db } from '@agentry/db';

/** Inbound event ids are pruned at most this often. */
const PRUNE_EVERY_MS = 3600_000;

/**
 * Every `sweepMs`, enqueues again the messages still queued `sweepGraceMs` past due (their job was
 * lost: a queue outage, a crash between commit and enqueue), so every committed message ends sent
 * or failed; and, hourly, prunes inbound event ids older than `inboundRetentionMs`. One pass at a
 * time: a slow pass is not overlapped by the next tick.
 */
export class OutboundSweeper {
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | undefined;
  #lastPrune = 0;

  constructor(
    private readonly deps: {
      db: Db;
      queue: Bus['queue'];
      logger: Logger;
      sweepMs: number;
      sweepGraceMs: number;
      inboundRetentionMs: number;
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
    if (Date.now() - this.#lastPrune > PRUNE_EVERY_MS) {
      this.#lastPrune = Date.now();
      const pruned = await pruneInboundEvents(db, this.deps.inboundRetentionMs);
      if (pruned > 0) logger.info({ pruned }, 'old inbound event ids pruned');
    }
  }
}
