import type { Job as BullJob } from 'bullmq';
import type { Consumer, CronFire, CronScheduler, CronSpec } from '../ports.js';
import { CRON_QUEUE, validateCronSpec } from '../shared.js';
import { KEEP_COMPLETED, KEEP_FAILED, type RedisContext } from './context.js';
import { RedisConsumer } from './job-queue.js';

/**
 * BullMQ job schedulers on one dedicated queue. BullMQ keeps one scheduler per id and one job
 * per tick (its id is `repeat:<id>:<tick ms>`), so several replicas upserting the same id and
 * consuming the queue still give one fire per tick.
 */
export class RedisCronScheduler implements CronScheduler {
  constructor(
    private readonly ctx: RedisContext,
    private readonly consumers: Set<RedisConsumer>,
  ) {}

  async upsert<T>(id: string, spec: CronSpec, data: T): Promise<void> {
    const { pattern, timezone } = validateCronSpec(spec);
    const q = await this.ctx.queue(CRON_QUEUE);
    await q.upsertJobScheduler(
      id,
      { pattern, tz: timezone },
      // The template is replaced as a whole on every upsert, so its options are always restated.
      { name: id, data, opts: { attempts: 1, removeOnComplete: KEEP_COMPLETED, removeOnFail: KEEP_FAILED } },
    );
  }

  async remove(id: string): Promise<void> {
    const q = await this.ctx.queue(CRON_QUEUE);
    await q.removeJobScheduler(id);
  }

  async list(): Promise<Array<{ id: string; pattern: string; timezone: string; next: Date | null }>> {
    const q = await this.ctx.queue(CRON_QUEUE);
    const schedulers = await q.getJobSchedulers(0, -1, true);
    return schedulers.map((s) => ({
      id: s.key,
      pattern: s.pattern ?? '',
      timezone: s.tz ?? 'UTC',
      next: s.next !== undefined ? new Date(Number(s.next)) : null,
    }));
  }

  consume<T>(handler: (fire: CronFire<T>) => Promise<void>, opts: { concurrency: number }): Consumer {
    return new RedisConsumer(
      this.ctx,
      CRON_QUEUE,
      (job) => handler(fireOf<T>(job)),
      {
        concurrency: opts.concurrency,
        onFailed: (job, err) => this.ctx.logger.error({ err, jobId: job.id }, 'cron fire failed'),
      },
      this.consumers,
    );
  }
}

/**
 * The tick is `opts.prevMillis`, which BullMQ sets to the scheduled time of the iteration the
 * job stands for (not when it was created or started); the job id carries the same number.
 */
export function fireOf<T>(job: BullJob<unknown>): CronFire<T> {
  const jobId = job.id ?? '';
  const fromId = /^repeat:(.*):(\d+)$/.exec(jobId);
  const id = job.repeatJobKey ?? fromId?.[1] ?? job.name;
  const tick = job.opts.prevMillis ?? (fromId?.[2] !== undefined ? Number(fromId[2]) : job.timestamp);
  return { id, scheduledAt: new Date(tick), data: job.data as T };
}
