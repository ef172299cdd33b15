import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import { CronFireJob, audienceAllows, budgetCounter } from '@agentry/contracts';
import type { Bus, CronFire } from '@agentry/bus';
import {
  finishCronRun,
  getCronJob,
  getCronRunByTick,
  getRuleChain,
  getRun,
  getChannelAccount,
  getUser,
  insertCronRun,
  isFinalRunStatus,
  listUnfinishedCronRuns,
  type CronDeliver,
  type CronJobRecord,
  type CronRunRecord,
  type Db,
  type RuleChainRow,
} from '@agentry/db';
import {
  HEARTBEAT_SESSION,
  agentDisabledError,
  cancelRun,
  completeCronRun,
  deliveryOf,
  enqueueRun,
  heartbeatOfDsl,
  isAgentDisabled,
  isHeartbeatJob,
  newRunId,
  recordCronRun,
  submitRun,
  withinActiveHours,
  type CronRunOutcome,
} from '@agentry/runs';
import { agentMaySendThrough, deliverChatRefusal, notBoundMessage } from '@agentry/channels';
import type { Reconciler } from './reconcile.js';

export interface FirerOptions {
  /** How long a fire's run may take: the sweep then fails the fire and cancels the run. */
  runTimeoutMs: number;
  /** Counts fires by outcome (`started`, `duplicate`, `skipped`, `failed`) for the metrics. */
  count?: (outcome: 'started' | 'duplicate' | 'skipped' | 'failed') => void;
}

/** The tick already has its row: another replica, or an earlier delivery of this fire, made it. */
class DuplicateFire extends Error {}

type Outcome = CronRunOutcome;

/**
 * Turns fires into runs. A fire inserts its tick's `cron_runs` row and the run in one transaction
 * (UNIQUE (cron_job_id, scheduled_at): a second delivery of the tick, on any replica, inserts
 * nothing and creates no run), enqueues the run, and is done: the worker completes the row when
 * the run ends (`completeCronRun`) and the connector records the answer's delivery
 * (`settleCronDelivery`). `sweep()`, which every replica runs, settles what neither did: runs
 * that ended elsewhere (cancelled, failed by a sweeper), vanished, or outlived the run timeout.
 */
export class Firer {
  constructor(
    private readonly db: Db,
    private readonly bus: Bus,
    private readonly reconciler: Reconciler,
    private readonly logger: Logger,
    private readonly opts: FirerOptions,
  ) {}

  /** The fire handler. It never throws for a failed fire: the failure is recorded and logged. */
  async fire(fire: CronFire<unknown>): Promise<void> {
    const cronJobId = Value.Check(CronFireJob, fire.data) ? fire.data.cronJobId : fire.id;
    const scheduledAt = fire.scheduledAt;
    const log = this.logger.child({ cronJobId, scheduledAt: scheduledAt.toISOString() });
    const job = await getCronJob(this.db, cronJobId);
    if (!job) {
      this.opts.count?.('skipped');
      log.warn('fire of a cron job that no longer exists; removing its scheduler');
      await this.bus.scheduler.remove(fire.id);
      return;
    }
    if (job.disabled) {
      this.opts.count?.('skipped');
      log.info('fire of a disabled cron job skipped');
      await this.reconciler.one(job.id);
      return;
    }
    const agent = await getRuleChain(this.db, job.agentId);
    if (agent && isAgentDisabled(agent.dsl)) return this.skipDisabledAgent(job, scheduledAt, log);
    if (isHeartbeatJob(job.id) && !inActiveHours(agent?.dsl, scheduledAt)) {
      // Outside the window is the heartbeat's normal silence: no row, or the history fills with nights.
      this.opts.count?.('skipped');
      log.debug('heartbeat tick outside its active hours');
      return;
    }

    const runId = newRunId();
    let cronRun: CronRunRecord | undefined;
    try {
      // Bindings may have changed since the job was written: checked again at every fire.
      if (job.deliver && !(await agentMaySendThrough(this.db, job.agentId, job.deliver.platform, job.deliver.accountId))) {
        throw new Error(notBoundMessage(job.agentId, job.deliver.platform, job.deliver.accountId));
      }
      // So may the account's allow_from: a chat it no longer admits is not sent to.
      if (job.deliver) {
        const account = await getChannelAccount(this.db, job.deliver.platform, job.deliver.accountId);
        const refusal = account && deliverChatRefusal(account, job.deliver.platform, job.deliver.chatId);
        if (refusal) throw new Error(refusal);
      }
      const principal = await runPrincipal(this.db, this.bus, job, agent, log);
      await submitRun(
        { db: this.db, queue: this.bus.queue },
        {
          agentId: job.agentId,
          ...sessionOf(job),
          // Whose run it is: its usage, budget and authority are the job owner's (a heartbeat's: the agent owner's).
          principal,
          // The worker sends the answer to `deliver` (an outbound message committed with the run's end).
          request: { messages: [{ role: 'user', content: job.message }], ...(job.deliver ? { reply: job.deliver } : {}) },
          runId,
          withRun: async (trx) => {
            cronRun = await insertCronRun(trx, { cronJobId, scheduledAt, runId });
            if (!cronRun) throw new DuplicateFire();
          },
        },
      );
    } catch (err) {
      if (err instanceof DuplicateFire) {
        this.opts.count?.('duplicate');
        return this.duplicate(cronJobId, scheduledAt, log);
      }
      this.opts.count?.('failed');
      log.error({ err }, 'cron fire failed');
      const error = `the run could not be started: ${(err as Error).message}`;
      // The row exists when the run committed but the queue refused it (submitRun then marked
      // the run failed); otherwise nothing committed and the failure gets a row of its own.
      const recorded = cronRun && (await finishCronRun(this.db, cronRun.id, { status: 'failed', error, ...deliveryOf(job.deliver, false) }));
      if (!recorded) await this.recordFailedFire(cronJobId, scheduledAt, error, job.deliver);
      return;
    }
    this.opts.count?.('started');
    log.info({ runId, lateMs: cronRun!.startedAt.getTime() - scheduledAt.getTime() }, 'cron fired');
  }

  /**
   * Settles fires still `running` whose run has ended without completing them (cancelled by a
   * person, failed by a sweeper, or its worker died in between), vanished, or outlived the run
   * timeout (the run is cancelled). Idempotent, safe on every replica at once.
   */
  async sweep(): Promise<void> {
    const rows = await listUnfinishedCronRuns(this.db, 500);
    for (const row of rows) {
      try {
        await this.settle(row);
      } catch (err) {
        this.logger.warn({ err, cronRunId: row.id }, 'could not settle a cron fire');
      }
    }
  }

  private async settle(row: CronRunRecord): Promise<void> {
    const late = Date.now() - row.startedAt.getTime() > this.opts.runTimeoutMs;
    const deliver = async () => (await getCronJob(this.db, row.cronJobId))?.deliver ?? null;
    if (!row.runId) {
      if (late) await this.record(row, { status: 'failed', error: 'the fire was interrupted before its run started', ...deliveryOf(await deliver(), false) });
      return;
    }
    const run = await getRun(this.db, row.runId);
    if (!run) return void (await this.record(row, { status: 'failed', error: 'the run was deleted before it finished', ...deliveryOf(await deliver(), false) }));
    if (isFinalRunStatus(run.status)) return void (await completeCronRun(this.db, run.id, this.logger));
    if (!late) return;
    await cancelRun({ db: this.db, pubsub: this.bus.pubsub }, run.id, 'cancelled: the cron fire waited too long for it');
    const error = `the run did not finish within ${duration(this.opts.runTimeoutMs)}; it was cancelled`;
    await this.record(row, { status: 'failed', error, ...deliveryOf(await deliver(), false) });
  }

  private async record(cronRun: CronRunRecord, outcome: Outcome): Promise<void> {
    await recordCronRun(this.db, cronRun.id, outcome, this.logger);
  }

  /**
   * The tick was fired already. If that fire's run is still queued, its job may have been lost
   * with the process that made it: enqueue it again (the job id is the run id, so a job that
   * still exists is not doubled). Otherwise nothing to do.
   */
  private async duplicate(cronJobId: string, scheduledAt: Date, log: Logger): Promise<void> {
    const existing = await getCronRunByTick(this.db, cronJobId, scheduledAt);
    if (existing?.status === 'running' && existing.runId) {
      const run = await getRun(this.db, existing.runId);
      if (run?.status === 'queued') {
        await enqueueRun(this.bus.queue, run.id);
        log.info({ runId: run.id }, 'fire delivered again while its run was queued; run job re-enqueued (deduplicated by id)');
        return;
      }
    }
    log.info('fire delivered again; this tick already ran, skipped');
  }

  /**
   * The job stays scheduled (enabling the agent again needs no cron change), but a tick of a
   * disabled agent starts no run: it gets a `skipped` row whose error says why, so the history
   * explains the silence. A second delivery of the tick finds the row and adds nothing.
   */
  private async skipDisabledAgent(job: CronJobRecord, scheduledAt: Date, log: Logger): Promise<void> {
    this.opts.count?.('skipped');
    log.info({ agentId: job.agentId }, 'fire skipped: its agent is disabled');
    const delivery = job.deliver ? { deliveryStatus: 'skipped' as const, deliveryError: 'no run was started; nothing to deliver' } : {};
    await this.recordFireWithoutRun(job.id, scheduledAt, { status: 'skipped', error: agentDisabledError(job.agentId).message, ...delivery });
  }

  /** A fire whose run could not even be created still leaves a row, so the history shows it. */
  private async recordFailedFire(cronJobId: string, scheduledAt: Date, error: string, deliver: CronDeliver | null): Promise<void> {
    await this.recordFireWithoutRun(cronJobId, scheduledAt, { status: 'failed', error, ...deliveryOf(deliver, false) });
  }

  private async recordFireWithoutRun(cronJobId: string, scheduledAt: Date, outcome: Outcome): Promise<void> {
    try {
      const row = await insertCronRun(this.db, { cronJobId, scheduledAt, runId: null });
      if (row) await finishCronRun(this.db, row.id, outcome);
    } catch (err) {
      this.logger.error({ err, cronJobId, status: outcome.status }, 'could not record the cron fire');
    }
  }
}

/** The tick's instant within the active hours of the agent's heartbeat (read from its DSL now)? */
function inActiveHours(dsl: unknown, scheduledAt: Date): boolean {
  const hb = heartbeatOfDsl(dsl);
  return withinActiveHours(hb?.activeHours, hb?.timezone, scheduledAt);
}

/** A cron job's runs share the session `cron:<id>`; a heartbeat's are the agent's `heartbeat` session. */
/**
 * The principal a fire runs as: `user:<owner>` of the job, or of the agent for a heartbeat (its
 * job follows the agent). Refused (a failed fire naming why) when that user may no longer chat
 * with the agent (its audience changed since the job was made) or its `tokensPerDay` is spent.
 * A budget counter that does not answer lets the fire through with a warning, as chat does.
 */
export async function runPrincipal(db: Db, counter: Pick<Bus, 'count'>, job: CronJobRecord, agent: RuleChainRow | undefined, log: Logger): Promise<string> {
  const owner = isHeartbeatJob(job.id) ? (agent?.owner ?? job.owner) : job.owner;
  const principal = `user:${owner}`;
  const user = await getUser(db, owner);
  if (agent && !audienceAllows(agent.audience, agent.owner, principal, user?.role)) {
    throw new Error(`agent "${agent.id}" is not shared with the job's owner "${owner}"`);
  }
  const limit = user?.budget?.tokensPerDay;
  if (limit && limit > 0) {
    const day = budgetCounter('tokensPerDay', principal);
    let used = 0;
    try {
      used = await counter.count(day.key, 0, day.ttlMs);
    } catch (err) {
      log.warn({ err }, "the job owner's budget is not enforced: its counter (the bus) does not answer");
    }
    if (used >= limit) throw new Error(`the tokensPerDay budget of ${principal} (${limit} tokens per day) is spent; it resets at ${day.resetsAt.toISOString()}`);
  }
  return principal;
}

function sessionOf(job: CronJobRecord): { session: { key: string; channel: string }; source: 'cron' | 'heartbeat' } {
  if (isHeartbeatJob(job.id)) return { session: { ...HEARTBEAT_SESSION }, source: 'heartbeat' };
  return { session: { key: `cron:${job.id}`, channel: 'cron' }, source: 'cron' };
}

function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}
