import type { Static } from 'typebox';
import { announceChange, type InvalidatePublisher } from '@agentry/contracts';
import { getCronJob, getRuleChain, listCronJobs, updateCronJob, type CronJobRecord } from '@agentry/db';
import { createCronJob, cronJobView, shortestGapSeconds } from '@agentry/runs';
import { ToolError, type ToolContext } from '../types.js';
import { cronSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, dbCall, type BuiltinTool } from './common.js';

/**
 * `cron`: the agent's own scheduled jobs (`cron_jobs` rows whose target is this agent). A job
 * sends its `message` to the agent at every tick of its schedule.
 *
 * Like the gateway's cron routes, every change is committed, then announced as `{area: 'cron',
 * id}` through `ctx.publishInvalidate` (the `invalidate` channel), so the schedulers bring that
 * job in step at once. Without the hook (no bus), or when the publish fails, the change reaches
 * them at their periodic reconcile (within a minute); the write stands either way.
 */

const Parameters = cronSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = cronSpec.configSchema;
type Config = Static<typeof Config>;

/** What the agent sees of a job: the API's view, the message cut short (the agent wrote it). */
function view(job: CronJobRecord) {
  const { id, name, schedule, timezone, message, disabled, nextRunAt, lastRunAt, lastStatus } = cronJobView(job);
  return { id, name, schedule, timezone, message: message.length > 500 ? `${message.slice(0, 500)}…` : message, disabled, nextRunAt, lastRunAt, lastStatus };
}

/** The context's `publishInvalidate` hook as the pub/sub port `announceChange` takes (none without a bus). */
function publisher(ctx: ToolContext): InvalidatePublisher | undefined {
  const publish = ctx.publishInvalidate;
  return publish && { publish: (_channel, message) => publish(message) };
}

export const cronTool: BuiltinTool = {
  ...cronSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('cron', Parameters, raw);
    const cfg = checkConfig<Config>('cron', Config, ctx.config);
    if (args.operation === 'list') {
      const jobs = await listCronJobs(ctx.db, { agentId: ctx.agentId });
      if (jobs.length === 0) return 'You have no cron jobs.';
      return JSON.stringify(jobs.map(view));
    }

    if (args.operation === 'create') {
      const missing = (['name', 'schedule', 'message'] as const).filter((k) => args[k] === undefined);
      if (missing.length > 0) throw new ToolError(`cron: operation "create" needs ${missing.join(', ')}`);
      const draft = {
        agentId: ctx.agentId,
        name: args.name as string,
        schedule: args.schedule as string,
        message: args.message as string,
        ...(args.timezone !== undefined ? { timezone: args.timezone } : {}),
      };
      const job = await createCronJob({ db: ctx.db, pubsub: publisher(ctx), logger: ctx.logger }, draft, {
        invalidSchedule: (reason) => new ToolError(`schedule: ${reason}`),
        // An agent's own jobs are held tighter than an operator's: a floor on the interval and a cap on their number.
        beforeInsert: async (schedule, timezone) => {
          const minInterval = cfg.minIntervalSeconds ?? 60;
          const gap = shortestGapSeconds(schedule, timezone);
          if (gap < minInterval) {
            throw new ToolError(`schedule: "${schedule}" fires every ${gap} s; jobs created here must be at least ${minInterval} s apart`);
          }
          const maxJobs = cfg.maxJobs ?? 20;
          const existing = await listCronJobs(ctx.db, { agentId: ctx.agentId });
          if (existing.length >= maxJobs) {
            throw new ToolError(`cron: you already have ${existing.length} jobs (the limit is ${maxJobs}); disable or ask an operator to remove one`);
          }
          // The job is the agent's doing: it belongs to whoever owns the agent.
          const owner = (await dbCall(() => getRuleChain(ctx.db, ctx.agentId)))?.owner;
          return owner !== undefined ? { owner } : {};
        },
        write: dbCall,
      });
      ctx.logger.info({ cronJobId: job.id, schedule: job.schedule }, 'cron tool created a job');
      return JSON.stringify({ created: view(job) });
    }

    // toggle
    if (args.id === undefined) throw new ToolError('cron: operation "toggle" needs id (see operation "list")');
    const job = await getCronJob(ctx.db, args.id);
    if (!job || job.agentId !== ctx.agentId) throw new ToolError(`cron job "${args.id}" not found among your jobs`);
    const disabled = args.disabled ?? !job.disabled;
    const updated = await updateCronJob(ctx.db, job.id, { disabled });
    if (!updated) throw new ToolError(`cron job "${args.id}" not found among your jobs`);
    const pubsub = publisher(ctx);
    if (pubsub) await announceChange(pubsub, ctx.logger, 'cron', [updated.id]);
    return JSON.stringify({ [disabled ? 'disabled' : 'enabled']: view(updated) });
  },
};
