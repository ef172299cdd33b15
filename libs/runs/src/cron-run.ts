import type { Logger } from 'pino';
import {
  finishCronRun,
  getCronJob,
  getCronRunOfRun,
  getOutboundByRun,
  getRun,
  isFinalRunStatus,
  type CronDeliver,
  type CronDeliveryStatus,
  type CronRunRecord,
  type Db,
  type RunRecord,
} from '@agentry/db';
import { HEARTBEAT_OK, isHeartbeatOk } from './heartbeat.js';

/** Longest output kept on a `cron_runs` row. */
export const OUTPUT_EXCERPT_CHARS = 2_000;

/** What a fire's `cron_runs` row is completed with. */
export type CronRunOutcome = Parameters<typeof finishCronRun>[2];

type Delivery = { deliveryStatus: CronDeliveryStatus | null; deliveryError: string | null };

/**
 * Completes the `cron_runs` row of a run that has ended (the worker calls it when it is done
 * with the run; the scheduler's sweep for runs that ended elsewhere): its status and output,
 * and its delivery as far as it is known now. An answer's delivery is `queued` until the
 * connector settles it (`settleCronDelivery`), unless it has already. Nothing for a run that came
 * from no fire, is still going, or whose fire is already completed (the first outcome wins).
 */
export async function completeCronRun(db: Db, runId: string, logger: Pick<Logger, 'info' | 'error'>): Promise<CronRunRecord | undefined> {
  const fire = await getCronRunOfRun(db, runId);
  if (fire?.status !== 'running') return undefined;
  const run = await getRun(db, runId);
  if (!run || !isFinalRunStatus(run.status)) return undefined;
  const deliver = (await getCronJob(db, fire.cronJobId))?.deliver ?? null;
  let outcome = endedOutcome(run, deliver);
  if (outcome.deliveryStatus === 'queued') outcome = { ...outcome, ...(await deliveryNow(db, runId)) };
  return recordCronRun(db, fire.id, outcome, logger);
}

/** Sets a fire's outcome (first wins) and logs it as the cron history's one line per fire. */
export async function recordCronRun(db: Db, cronRunId: number, outcome: CronRunOutcome, logger: Pick<Logger, 'info' | 'error'>): Promise<CronRunRecord | undefined> {
  const row = await finishCronRun(db, cronRunId, outcome);
  if (!row) return undefined;
  const fields = { cronJobId: row.cronJobId, scheduledAt: row.scheduledAt.toISOString(), runId: row.runId, status: row.status };
  if (row.status === 'failed') logger.error({ ...fields, error: row.error }, 'cron run failed');
  else logger.info({ ...fields, ms: (row.finishedAt?.getTime() ?? Date.now()) - row.startedAt.getTime() }, 'cron run finished');
  return row;
}

/** The answer's outbound message as it stands: none was written for an empty answer. */
async function deliveryNow(db: Db, runId: string): Promise<Delivery> {
  const message = await getOutboundByRun(db, runId);
  if (!message) return { deliveryStatus: 'skipped', deliveryError: 'the answer was empty; nothing was sent' };
  if (message.status === 'sent') return { deliveryStatus: 'sent', deliveryError: null };
  if (message.status === 'failed') return { deliveryStatus: 'failed', deliveryError: message.error };
  return { deliveryStatus: 'queued', deliveryError: message.error ? `not sent yet (last error: ${message.error})` : 'not sent yet' };
}

/**
 * An answered fire's delivery starts `queued` (the worker committed the reply with the run) and
 * the connector settles it to `sent` or `failed`; a failed run has nothing to send.
 */
export function deliveryOf(deliver: CronDeliver | null, answered: boolean): Delivery {
  if (!deliver) return { deliveryStatus: null, deliveryError: null };
  if (!answered) return { deliveryStatus: 'skipped', deliveryError: 'the run produced no answer to deliver' };
  return { deliveryStatus: 'queued', deliveryError: null };
}

function excerpt(text: string | null): string | null {
  if (text === null || text === '') return null;
  return text.length <= OUTPUT_EXCERPT_CHARS ? text : `${text.slice(0, OUTPUT_EXCERPT_CHARS - 1)}…`;
}

/** A fire's outcome from its ended run (a heartbeat's no-op answer is a success that sends nothing). */
export function endedOutcome(run: RunRecord, deliver: CronDeliver | null): CronRunOutcome {
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
