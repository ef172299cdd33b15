import { sql, type Selectable } from 'kysely';
import type { Db } from '../handle.js';
import type { CronDeliveryStatus, CronJobsTable, CronRunStatus, CronRunsTable, JsonValue } from '../tables.js';

/** Where a job's answer goes (a channel account and a chat on its platform). */
export interface CronDeliver {
  platform: string;
  accountId: string;
  chatId: string;
}

export interface CronJobRecord {
  id: string;
  agentId: string;
  name: string;
  schedule: string;
  message: string;
  timezone: string;
  disabled: boolean;
  deliver: CronDeliver | null;
  /** Username of the creator. */
  owner: string;
  createdAt: Date;
  updatedAt: Date;
  /** The tick of the latest fire. */
  lastRunAt: Date | null;
  /** The status of the latest fire. */
  lastStatus: CronRunStatus | null;
}

export interface CronRunRecord {
  id: number;
  cronJobId: string;
  scheduledAt: Date;
  runId: string | null;
  startedAt: Date;
  finishedAt: Date | null;
  status: CronRunStatus;
  outputExcerpt: string | null;
  error: string | null;
  deliveryStatus: CronDeliveryStatus | null;
  deliveryError: string | null;
}

const JOB_COLUMNS = [
  'id',
  'agent_id',
  'name',
  'schedule',
  'message',
  'timezone',
  'disabled',
  'deliver',
  'owner',
  'created_at',
  'updated_at',
  'last_run_at',
  'last_status',
] as const;

const RUN_COLUMNS = [
  'id',
  'cron_job_id',
  'scheduled_at',
  'run_id',
  'started_at',
  'finished_at',
  'status',
  'output_excerpt',
  'error',
  'delivery_status',
  'delivery_error',
] as const;

function toJob(r: Selectable<CronJobsTable>): CronJobRecord {
  return {
    id: r.id,
    agentId: r.agent_id,
    name: r.name,
    schedule: r.schedule,
    message: r.message,
    timezone: r.timezone,
    disabled: r.disabled,
    deliver: (r.deliver as CronDeliver | null) ?? null,
    owner: r.owner,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    lastRunAt: r.last_run_at,
    lastStatus: r.last_status,
  };
}

function toRun(r: Selectable<CronRunsTable>): CronRunRecord {
  return {
    id: Number(r.id),
    cronJobId: r.cron_job_id,
    scheduledAt: r.scheduled_at,
    runId: r.run_id,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    status: r.status,
    outputExcerpt: r.output_excerpt,
    error: r.error,
    deliveryStatus: r.delivery_status,
    deliveryError: r.delivery_error,
  };
}

const deliverJson = (d: CronDeliver | null) => (d === null ? null : JSON.stringify(d as unknown as JsonValue));

export interface NewCronJob {
  id: string;
  agentId: string;
  name: string;
  schedule: string;
  message: string;
  timezone: string;
  disabled: boolean;
  deliver: CronDeliver | null;
  /** Default `admin`. */
  owner?: string;
}

/** Inserts a job; a taken id raises the driver's unique violation (see isUniqueViolation). */
export async function insertCronJob(db: Db, job: NewCronJob): Promise<CronJobRecord> {
  const row = await db
    .insertInto('cron_jobs')
    .values({
      id: job.id,
      agent_id: job.agentId,
      name: job.name,
      schedule: job.schedule,
      message: job.message,
      timezone: job.timezone,
      disabled: job.disabled,
      deliver: deliverJson(job.deliver),
      ...(job.owner !== undefined ? { owner: job.owner } : {}),
    })
    .returning(JOB_COLUMNS)
    .executeTakeFirstOrThrow();
  return toJob(row);
}

export async function getCronJob(db: Db, id: string): Promise<CronJobRecord | undefined> {
  const row = await db.selectFrom('cron_jobs').select(JOB_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row && toJob(row);
}

/** Jobs, oldest first; `agentId` narrows to one agent's, `enabled` to jobs that fire. */
export async function listCronJobs(db: Db, filter: { agentId?: string; enabled?: boolean; owner?: string } = {}): Promise<CronJobRecord[]> {
  let q = db.selectFrom('cron_jobs').select(JOB_COLUMNS);
  if (filter.owner !== undefined) q = q.where('owner', '=', filter.owner);
  if (filter.agentId !== undefined) q = q.where('agent_id', '=', filter.agentId);
  if (filter.enabled !== undefined) q = q.where('disabled', '=', !filter.enabled);
  const rows = await q.orderBy('created_at').orderBy('id').execute();
  return rows.map(toJob);
}

/** Changes the given fields; undefined when the job does not exist. */
export async function updateCronJob(
  db: Db,
  id: string,
  patch: Partial<Pick<NewCronJob, 'agentId' | 'name' | 'schedule' | 'message' | 'timezone' | 'disabled' | 'deliver'>>,
): Promise<CronJobRecord | undefined> {
  const row = await db
    .updateTable('cron_jobs')
    .set({
      ...(patch.agentId !== undefined ? { agent_id: patch.agentId } : {}),
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.schedule !== undefined ? { schedule: patch.schedule } : {}),
      ...(patch.message !== undefined ? { message: patch.message } : {}),
      ...(patch.timezone !== undefined ? { timezone: patch.timezone } : {}),
      ...(patch.disabled !== undefined ? { disabled: patch.disabled } : {}),
      ...(patch.deliver !== undefined ? { deliver: deliverJson(patch.deliver) } : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .returning(JOB_COLUMNS)
    .executeTakeFirst();
  return row && toJob(row);
}

export async function deleteCronJob(db: Db, id: string): Promise<boolean> {
  const result = await db.deleteFrom('cron_jobs').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * Records the fire of tick `scheduledAt`, or returns undefined when that tick already has a row
 * (another replica, or a second delivery of the same fire, got there first). Call it in the
 * transaction that creates the run, so that the row and its run commit together. The job's
 * `lastRunAt`/`lastStatus` follow when this is its newest tick.
 */
export async function insertCronRun(
  db: Db,
  fire: { cronJobId: string; scheduledAt: Date; runId: string | null },
): Promise<CronRunRecord | undefined> {
  const row = await db
    .insertInto('cron_runs')
    .values({ cron_job_id: fire.cronJobId, scheduled_at: fire.scheduledAt, run_id: fire.runId })
    .onConflict((oc) => oc.columns(['cron_job_id', 'scheduled_at']).doNothing())
    .returning(RUN_COLUMNS)
    .executeTakeFirst();
  if (!row) return undefined;
  await db
    .updateTable('cron_jobs')
    .set({ last_run_at: fire.scheduledAt, last_status: 'running' })
    .where('id', '=', fire.cronJobId)
    .where((eb) => eb.or([eb('last_run_at', 'is', null), eb('last_run_at', '<=', fire.scheduledAt)]))
    .execute();
  return toRun(row);
}

export async function getCronRunByTick(db: Db, cronJobId: string, scheduledAt: Date): Promise<CronRunRecord | undefined> {
  const row = await db
    .selectFrom('cron_runs')
    .select(RUN_COLUMNS)
    .where('cron_job_id', '=', cronJobId)
    .where('scheduled_at', '=', scheduledAt)
    .executeTakeFirst();
  return row && toRun(row);
}

/**
 * Sets the outcome of a fire still `running` (the first outcome wins: several replicas may try)
 * and mirrors it on the job when this is its newest tick. Undefined when it had already ended.
 */
export async function finishCronRun(
  db: Db,
  id: number,
  outcome: {
    status: Exclude<CronRunStatus, 'running'>;
    outputExcerpt?: string | null;
    error?: string | null;
    deliveryStatus?: CronDeliveryStatus | null;
    deliveryError?: string | null;
  },
): Promise<CronRunRecord | undefined> {
  const row = await db
    .updateTable('cron_runs')
    .set({
      status: outcome.status,
      output_excerpt: outcome.outputExcerpt ?? null,
      error: outcome.error ?? null,
      // A delivery the connector settled first (it may send before the run's record is completed) stays.
      delivery_status: sql<CronDeliveryStatus | null>`coalesce(delivery_status, ${outcome.deliveryStatus ?? null})`,
      delivery_error: sql<string | null>`case when delivery_status is null then ${outcome.deliveryError ?? null} else delivery_error end`,
      finished_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .where('status', '=', 'running')
    .returning(RUN_COLUMNS)
    .executeTakeFirst();
  if (!row) return undefined;
  await db
    .updateTable('cron_jobs')
    .set({ last_status: outcome.status })
    .where('id', '=', row.cron_job_id)
    .where('last_run_at', '=', row.scheduled_at)
    .execute();
  return toRun(row);
}

/** The fire whose run this is, if the run came from a cron job or a heartbeat. */
export async function getCronRunOfRun(db: Db, runId: string): Promise<CronRunRecord | undefined> {
  const row = await db.selectFrom('cron_runs').select(RUN_COLUMNS).where('run_id', '=', runId).executeTakeFirst();
  return row && toRun(row);
}

/**
 * Records what became of a fire's answer once its outbound message has ended (the connector
 * calls it). It applies while the delivery is still `queued`, and also before the fire's record
 * is completed (the connector may be faster than the worker); a settled delivery is never changed.
 */
export async function settleCronDelivery(db: Db, runId: string, delivery: { status: 'sent' | 'failed'; error: string | null }): Promise<boolean> {
  const result = await db
    .updateTable('cron_runs')
    .set({ delivery_status: delivery.status, delivery_error: delivery.status === 'sent' ? null : delivery.error })
    .where('run_id', '=', runId)
    .where((eb) => eb.or([eb('delivery_status', '=', 'queued'), eb.and([eb('status', '=', 'running'), eb('delivery_status', 'is', null)])]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** A job's fires, newest tick first. */
export async function listCronRuns(
  db: Db,
  cronJobId: string,
  page: { limit: number; offset: number },
): Promise<{ data: CronRunRecord[]; total: number }> {
  const base = db.selectFrom('cron_runs').where('cron_job_id', '=', cronJobId);
  const [rows, count] = await Promise.all([
    base.select(RUN_COLUMNS).orderBy('scheduled_at', 'desc').limit(page.limit).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { data: rows.map(toRun), total: Number(count.n) };
}

/** Fires still waiting for their outcome, oldest first (for the scheduler's sweep). */
export async function listUnfinishedCronRuns(db: Db, limit: number): Promise<CronRunRecord[]> {
  const rows = await db.selectFrom('cron_runs').select(RUN_COLUMNS).where('status', '=', 'running').orderBy('started_at').limit(limit).execute();
  return rows.map(toRun);
}
