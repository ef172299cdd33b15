import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import { CronFireJob, audienceAllows, budgetCounter } from '@agentry/contracts';
import type { Bus, CronFire } from '@agentry/bus';
import {
  finishCronRun,
  getCronJob,
  getCronRunByTick,
  getOutboundByRun,
  getRuleChain,
  getRun,
  getChannelAccount,
  getUser,
  insertCronRun,
  isFinalRunStatus,
  listUnfinishedCronRuns,
  type CronDeliver,
  type CronDeliveryStatus,
  type CronJobRecord,
  type CronRunRecord,
  type Db,
  type RuleChainRow,
  type RunRecord,
} from '@agentry/db';
import {
  HEARTBEAT_OK,
  HEARTBEAT_SESSION,
  agentDisabledError,
  cancelRun,
  enqueueRun,
  heartbeatOfDsl,
  isAgentDisabled,
  isHeartbeatJob,
  isHeartbeatOk,
  newRunId,
  submitRun,
  watchRun,
  withinActiveHours,
  type RunWatchResult,
  type RunWatch,
} from '@agentry/engine';
import { agentMaySendThrough, deliverChatRefusal, notBoundMessage } from '@agentry/channels';
import type { Reconciler } from './reconcile.js';

/** Longest output kept on a `cron_runs` row. */
export const OUTPUT_EXCERPT_CHARS = 2_000;

export interface FirerOptions {
  /** How long a fire waits for its run before failing it (and cancelling the run). */
  runTimeoutMs: number;
  /** How often a fire's watcher reads the run row, should the end event be lost. */
  pollMs: number;
  /** How long a finished fire follows its answer's delivery before recording it as still `queued`. */
  deliveryWaitMs: number;
  /** Counts fires by outcome (`started`, `duplicate`, `skipped`, `failed`) for the metrics. */
  count?: (outcome: 'started' | 'duplicate' | 'skipped' | 'failed') => void;
}

/** The tick already has its row: another replica, or an earlier delivery of this fire, made it. */
class DuplicateFire extends Error {}

type Outcome = Parameters<typeof finishCronRun>[2];

/**
 * Turns fires into runs and records them in `cron_runs`. A fire inserts its tick's row and the
 * run in one transaction (UNIQUE (cron_job_id, scheduled_at): a second delivery of the tick, on
 * any replica, inserts nothing and creates no run), then enqueues the run and follows it to its
 * end: the run's `done`/`error` event, a poll of the run row, and a bound on the wait. Fires whose
 * follower died with its process are finished by `sweep()`, which every replica runs.
 */
export class Firer {
  /** cron_runs ids this process follows, with the follower's promise. */
  private readonly following = new Map<number, Promise<void>>();
  private readonly stop = new AbortController();

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
    // Listening before the job exists: the run's end event cannot be missed.
    const watch = await watchRun({ db: this.db, pubsub: this.bus.pubsub }, runId);
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
      await watch.close();
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
    const started = cronRun!;
    this.opts.count?.('started');
    log.info({ runId, lateMs: started.startedAt.getTime() - scheduledAt.getTime() }, 'cron fired');
    this.follow(started, watch, job.deliver);
  }

  /**
   * Finishes fires still `running` whose run has ended (their follower died with its process),
   * vanished, or outlived the run timeout. Idempotent, safe on every replica at once.
   */
  async sweep(): Promise<void> {
    const rows = await listUnfinishedCronRuns(this.db, 500);
    for (const row of rows) {
      if (this.following.has(row.id)) continue;
      try {
        const deliver = (await getCronJob(this.db, row.cronJobId))?.deliver ?? null;
        if (!row.runId) {
          if (Date.now() - row.startedAt.getTime() > this.opts.runTimeoutMs) {
            await this.record(row, { status: 'failed', error: 'the fire was interrupted before its run started', ...deliveryOf(deliver, false) });
          }
          continue;
        }
        const run = await getRun(this.db, row.runId);
        if (!run) await this.record(row, outcomeOf({ kind: 'gone' }, deliver, this.opts.runTimeoutMs));
        else if (isFinalRunStatus(run.status)) {
          await this.record(row, outcomeOf({ kind: 'ended', run }, deliver, this.opts.runTimeoutMs));
        } else if (Date.now() - row.startedAt.getTime() > this.opts.runTimeoutMs) {
          await this.cancelLateRun(run.id);
          await this.record(row, outcomeOf({ kind: 'timeout' }, deliver, this.opts.runTimeoutMs));
        }
      } catch (err) {
        this.logger.warn({ err, cronRunId: row.id }, 'could not settle a cron fire');
      }
    }
  }

  /**
   * What became of the answer's delivery: the reply's outbound message, followed for at most
   * `deliveryWaitMs` (it may be retrying); `queued` when it has not ended by then.
   */
  private async delivery(runId: string): Promise<{ deliveryStatus: CronDeliveryStatus; deliveryError: string | null }> {
    const deadline = Date.now() + this.opts.deliveryWaitMs;
    for (;;) {
      const message = await getOutboundByRun(this.db, runId);
      if (!message) return { deliveryStatus: 'skipped', deliveryError: 'the answer was empty; nothing was sent' };
      if (message.status === 'sent') return { deliveryStatus: 'sent', deliveryError: null };
      if (message.status === 'failed') return { deliveryStatus: 'failed', deliveryError: message.error };
      if (Date.now() >= deadline || this.stop.signal.aborted) {
        return { deliveryStatus: 'queued', deliveryError: message.error ? `not sent yet (last error: ${message.error})` : 'not sent yet' };
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(500, Math.max(0, deadline - Date.now()))));
    }
  }

  /** Stops following (fires still running are left to the sweep of a live replica or the next start). */
  async close(): Promise<void> {
    this.stop.abort();
    await Promise.allSettled([...this.following.values()]);
  }

  private follow(cronRun: CronRunRecord, watch: RunWatch, deliver: CronDeliver | null): void {
    const done = (async () => {
      try {
        const outcome = await watch.outcome({ timeoutMs: this.opts.runTimeoutMs, pollMs: this.opts.pollMs, signal: this.stop.signal });
        if (outcome.kind === 'aborted') return;
        if (outcome.kind === 'timeout') await this.cancelLateRun(cronRun.runId!);
        await this.record(cronRun, outcomeOf(outcome, deliver, this.opts.runTimeoutMs));
      } catch (err) {
        this.logger.warn({ err, cronRunId: cronRun.id }, 'could not record a cron fire outcome; the sweep will');
      } finally {
        this.following.delete(cronRun.id);
      }
    })();
    this.following.set(cronRun.id, done);
  }

  private async record(cronRun: CronRunRecord, outcome: Outcome): Promise<void> {
    if (outcome.deliveryStatus === 'queued' && cronRun.runId) outcome = { ...outcome, ...(await this.delivery(cronRun.runId)) };
    const row = await finishCronRun(this.db, cronRun.id, outcome);
    if (!row) return;
    const fields = { cronJobId: row.cronJobId, scheduledAt: row.scheduledAt.toISOString(), runId: row.runId, status: row.status };
    if (row.status === 'failed') this.logger.error({ ...fields, error: row.error }, 'cron run failed');
    else this.logger.info({ ...fields, ms: (row.finishedAt?.getTime() ?? Date.now()) - row.startedAt.getTime() }, 'cron run finished');
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

  private async cancelLateRun(runId: string): Promise<void> {
    await cancelRun({ db: this.db, pubsub: this.bus.pubsub }, runId, 'cancelled: the cron fire waited too long for it');
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

/**
 * An answered fire's delivery starts `queued` (the worker committed the reply with the run) and
 * `record` follows it to `sent` or `failed`; a failed run has nothing to send.
 */
function deliveryOf(deliver: CronDeliver | null, answered: boolean): { deliveryStatus: CronDeliveryStatus | null; deliveryError: string | null } {
  if (!deliver) return { deliveryStatus: null, deliveryError: null };
  if (!answered) return { deliveryStatus: 'skipped', deliveryError: 'the run produced no answer to deliver' };
  return { deliveryStatus: 'queued', deliveryError: null };
}

function excerpt(text: string | null): string | null {
  if (text === null || text === '') return null;
  return text.length <= OUTPUT_EXCERPT_CHARS ? text : `${text.slice(0, OUTPUT_EXCERPT_CHARS - 1)}…`;
}

function outcomeOf(outcome: Exclude<RunWatchResult, { kind: 'aborted' }>, deliver: CronDeliver | null, timeoutMs: number): Outcome {
  switch (outcome.kind) {
    case 'ended':
      return endedOutcome(outcome.run, deliver);
    case 'gone':
      return { status: 'failed', error: 'the run was deleted before it finished', ...deliveryOf(deliver, false) };
    case 'timeout':
      return { status: 'failed', error: `the run did not finish within ${duration(timeoutMs)}; it was cancelled`, ...deliveryOf(deliver, false) };
  }
}

function endedOutcome(run: RunRecord, deliver: CronDeliver | null): Outcome {
  if (run.status === 'succeeded' && run.source === 'heartbeat' && isHeartbeatOk(run.output)) {
    const quiet = deliver ? { deliveryStatus: 'skipped' as const, deliveryError: `${HEARTBEAT_OK}: nothing needed attention; nothing was sent` } : {};
    return { status: 'succeeded', outputExcerpt: excerpt(run.output), ...quiet };
  }
  if (run.status === 'succeeded') return { status: 'succeeded', outputExcerpt: excerpt(run.output), ...deliveryOf(deliver, true) };
  return {
    status: 'failed',
    outputExcerpt: excerpt(run.output),
    error: run.error ?? `the run was ${run.status}`,
    ...deliveryOf(deliver, false),
  };
}

function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}
