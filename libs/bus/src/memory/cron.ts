import { Cron } from 'croner';
import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import type { Consumer, CronFire, CronScheduler, CronSpec } from '../ports.js';
import { CRON_QUEUE, LongTimer, encodeJson, validateCronSpec } from '../shared.js';
import type { MemoryJobQueue } from './job-queue.js';

interface Schedule {
  id: string;
  pattern: string;
  timezone: string;
  data: string;
  cron: Cron;
  next: Date | null;
  timer: LongTimer | undefined;
}

interface FirePayload {
  id: string;
  scheduledAt: number;
  data: unknown;
}

/** The one queue of the private fire queue. */
export interface FireQueues {
  [CRON_QUEUE]: FirePayload;
}

/**
 * Croner computes the ticks; the fires travel through a private in-memory job queue so that
 * consumers get the same concurrency, failure and close semantics as BullMQ's scheduler worker.
 */
export class MemoryCronScheduler implements CronScheduler {
  private readonly schedules = new Map<string, Schedule>();
  /**
   * Schedules with a fire still waiting for a handler. Like BullMQ, which creates the next fire
   * only when the previous one is picked up, a schedule nobody consumes holds one pending fire.
   */
  private readonly pending = new Set<string>();
  private closed = false;

  constructor(
    private readonly fires: MemoryJobQueue<FireQueues>,
    private readonly logger: Logger,
  ) {}

  async upsert<T>(id: string, spec: CronSpec, data: T): Promise<void> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    const { pattern, timezone } = validateCronSpec(spec);
    const payload = encodeJson(data, 'schedule data');
    this.stop(id);
    const schedule: Schedule = {
      id,
      pattern,
      timezone,
      data: payload,
      cron: new Cron(pattern, { mode: '6-part', timezone }),
      next: null,
      timer: undefined,
    };
    this.schedules.set(id, schedule);
    this.arm(schedule, new Date());
  }

  async remove(id: string): Promise<void> {
    this.stop(id);
  }

  async list(): Promise<Array<{ id: string; pattern: string; timezone: string; next: Date | null }>> {
    return [...this.schedules.values()].map((s) => ({ id: s.id, pattern: s.pattern, timezone: s.timezone, next: s.next }));
  }

  consume<T>(handler: (fire: CronFire<T>) => Promise<void>, opts: { concurrency: number }): Consumer {
    return this.fires.consume(
      CRON_QUEUE,
      async (job) => {
        this.pending.delete(job.data.id);
        await handler({ id: job.data.id, scheduledAt: new Date(job.data.scheduledAt), data: job.data.data as T });
      },
      {
        concurrency: opts.concurrency,
        onFailed: (job, err) => this.logger.error({ err, schedule: (job.data as FirePayload).id }, 'cron fire failed'),
      },
    );
  }

  /** Stops ticking; fires already queued stay with the job queue, which closes them. */
  close(): void {
    this.closed = true;
    for (const id of [...this.schedules.keys()]) this.stop(id);
  }

  private stop(id: string): void {
    const schedule = this.schedules.get(id);
    if (!schedule) return;
    schedule.timer?.clear();
    schedule.cron.stop();
    this.schedules.delete(id);
  }

  private arm(schedule: Schedule, after: Date): void {
    const next = schedule.cron.nextRun(after);
    schedule.next = next;
    if (!next) return;
    // Node may wake a timer a millisecond early: the tick is `next`, whatever the clock says.
    schedule.timer = new LongTimer(() => this.tick(schedule, next), next.getTime() - Date.now());
  }

  private tick(schedule: Schedule, at: Date): void {
    if (this.schedules.get(schedule.id) !== schedule) return;
    // A late timer (busy event loop) skips the ticks it missed rather than firing a burst.
    this.arm(schedule, new Date(Math.max(at.getTime(), Date.now())));
    if (this.pending.has(schedule.id)) return;
    this.pending.add(schedule.id);
    const fire: FirePayload = { id: schedule.id, scheduledAt: at.getTime(), data: JSON.parse(schedule.data) as unknown };
    this.fires.enqueue(CRON_QUEUE, fire).catch((err: unknown) => {
      this.pending.delete(schedule.id);
      this.logger.error({ err, schedule: schedule.id }, 'could not queue cron fire');
    });
  }
}
