import type { Job as BullJob } from 'bullmq';
import type { Consumer, CronFire, CronScheduler, CronSpec } from '../ports.js';
import { CRON_QUEUE, validateCronSpec } from '../shared.js';
import { KEEP_COMPLETED, KEEP_FAILED, type RedisContext } from './context.js';
import { RedisConsumer } from './job-queue.js';

/** Upserts of one id that collide with another replica's (below) are tried this often in all. */
const UPSERT_TRIES = 5;

/** BullMQ's SchedulerJobIdCollision (-10) and SchedulerJobSlotsBusy (-11): the tick's job exists in a state it cannot replace. */
function isSchedulerCollision(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === -10 || code === -11;
}

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
    for (let tries = 1; ; tries++) {
      try {
        await q.upsertJobScheduler(
          id,
          { pattern, tz: timezone },
          // The template is replaced as a whole on every upsert, so its options are always restated.
          { name: id, data, opts: { attempts: 1, removeOnComplete: KEEP_COMPLETED, removeOnFail: KEEP_FAILED } },
        );
        return;
      } catch (err) {
        // Two replicas upserting one id at once: BullMQ could not replace the tick job the other
        // made (it was being run) and stored nothing. Once that run ends the upsert goes through.
        if (!isSchedulerCollision(err) || tries >= UPSERT_TRIES) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** tries));
      }
    }
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
