import type { CronJob } from '@agentry/contracts';
import type { CronJobRecord } from '@agentry/db';
import { nextTick } from './schedule.js';

/**
 * A cron job as the API shows it (`CronJob`), with its next tick worked out now. The one place
 * the view is built: the REST routes answer it, the agent's `cron` tool lists from it, so a new
 * field or a change to what `nextRunAt` means reaches both.
 */
export function cronJobView(job: CronJobRecord, now: Date = new Date()): CronJob {
  const next = job.disabled ? null : nextTick(job.schedule, job.timezone, now);
  return {
    id: job.id,
    name: job.name,
    schedule: job.schedule,
    message: job.message,
    target: job.agentId,
    disabled: job.disabled,
    timezone: job.timezone,
    deliver: job.deliver,
    owner: job.owner,
    nextRunAt: next ? next.toISOString() : null,
    lastRunAt: job.lastRunAt ? job.lastRunAt.toISOString() : null,
    lastStatus: job.lastStatus,
    createdAt: job.createdAt.toISOString(),
    updatedAt: job.updatedAt.toISOString(),
  };
}
