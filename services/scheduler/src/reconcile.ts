import type { Logger } from 'pino';
import type { CronFireJob } from '@agentry/contracts';
import type { CronScheduler } from '@agentry/bus';
import { getCronJob, listCronJobs, type CronJobRecord, type Db } from '@agentry/db';

type Installed = Awaited<ReturnType<CronScheduler['list']>>[number];

export interface ReconcileResult {
  added: number;
  changed: number;
  removed: number;
  failed: number;
}

/** What a job's scheduler carries: the job id only (the row is the truth). */
export function fireData(cronJobId: string): CronFireJob {
  return { type: 'cron-fire', v: 1, cronJobId };
}

/**
 * Keeps the bus's job schedulers in step with the `cron_jobs` table: one scheduler per enabled
 * job, id = job id, same pattern and time zone; none for disabled or deleted jobs. The schedulers
 * of the bus's cron queue belong to cron jobs: anything else there is removed.
 *
 * Several replicas run this at once; that is safe because upserting the same scheduler id is
 * idempotent (one scheduler, one fire per tick) and every step reads the table's current state.
 * Within a replica the steps run one at a time, in the order their triggers arrived.
 */
export class Reconciler {
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly scheduler: CronScheduler,
    private readonly logger: Logger,
  ) {}

  /** The whole table against every installed scheduler. */
  all(): Promise<ReconcileResult> {
    return this.serial(async () => {
      const [jobs, installed] = await Promise.all([listCronJobs(this.db, { enabled: true }), this.scheduler.list()]);
      const wanted = new Map(jobs.map((j) => [j.id, j]));
      const result: ReconcileResult = { added: 0, changed: 0, removed: 0, failed: 0 };
      for (const s of installed) {
        if (wanted.has(s.id)) continue;
        await this.step(result, s.id, async () => {
          await this.scheduler.remove(s.id);
          result.removed += 1;
        });
      }
      const byId = new Map(installed.map((s) => [s.id, s]));
      for (const job of jobs) await this.step(result, job.id, () => this.install(job, byId.get(job.id), result));
      if (result.added + result.changed + result.removed + result.failed > 0) this.logger.info({ ...result }, 'cron schedulers reconciled');
      return result;
    });
  }

  /** One job (after a change announced on `invalidate`, or a fire that found it disabled). */
  one(id: string): Promise<ReconcileResult> {
    return this.serial(async () => {
      const [job, installed] = await Promise.all([getCronJob(this.db, id), this.scheduler.list()]);
      const current = installed.find((s) => s.id === id);
      const result: ReconcileResult = { added: 0, changed: 0, removed: 0, failed: 0 };
      await this.step(result, id, async () => {
        if (job && !job.disabled) {
          await this.install(job, current, result);
        } else if (current) {
          await this.scheduler.remove(id);
          result.removed += 1;
          this.logger.info({ cronJobId: id, reason: job ? 'disabled' : 'deleted' }, 'cron scheduler removed');
        }
      });
      return result;
    });
  }

  private async install(job: CronJobRecord, current: Installed | undefined, result: ReconcileResult): Promise<void> {
    if (current && current.pattern === job.schedule && current.timezone === job.timezone) return;
    await this.scheduler.upsert(job.id, { pattern: job.schedule, timezone: job.timezone }, fireData(job.id));
    if (current) result.changed += 1;
    else result.added += 1;
    this.logger.info({ cronJobId: job.id, schedule: job.schedule, timezone: job.timezone, was: current?.pattern }, current ? 'cron scheduler changed' : 'cron scheduler added');
  }

  /** One job's failure (a schedule the adapter refuses, a Redis hiccup) never stops the others. */
  private async step(result: ReconcileResult, id: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      result.failed += 1;
      this.logger.error({ err, cronJobId: id }, 'could not bring a cron scheduler in step');
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
