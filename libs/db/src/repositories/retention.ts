import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../handle.js';
import { ACTIVE_RUN_STATUSES, FINAL_RUN_STATUSES } from '../tables.js';

// Literals, not parameters: the planner matches them against the partial indexes' predicates
// (runs_finished_at is `where status in ('succeeded', 'failed', 'cancelled')`).
const ACTIVE_RUNS = sql.join(ACTIVE_RUN_STATUSES.map((s) => sql.lit(s)));
const FINAL_RUNS = sql.join(FINAL_RUN_STATUSES.map((s) => sql.lit(s)));

/** Rows older than these instants are deleted; a missing one keeps its rows for ever. */
export interface RetentionCutoffs {
  /** Sessions whose last turn is older, with no run since (their messages and runs go with them). */
  sessions?: Date;
  /** Finished runs (succeeded, failed, cancelled). */
  runs?: Date;
  /** Finished cron fires (the history of GET /cron/:id/runs). */
  cronRuns?: Date;
  /** Outbound channel messages that ended `sent` or `failed`. */
  outbound?: Date;
  /** Inbound event ids kept to drop platform redeliveries. */
  inbound?: Date;
}

export type RetentionCounts = Record<keyof RetentionCutoffs, number>;

/**
 * Deletes what the cutoffs expire, `batch` rows per statement so that no statement holds locks
 * for long, and at most `maxBatches` statements per table per call so that a large backlog is
 * spread over several passes. Rows in flight are never touched: runs and fires not yet final,
 * messages still queued or sending, sessions with a run created since the cutoff.
 */
export async function deleteExpired(db: Db, cutoffs: RetentionCutoffs, opts: { batch?: number; maxBatches?: number } = {}): Promise<RetentionCounts> {
  const batch = opts.batch ?? 1_000;
  const maxBatches = opts.maxBatches ?? 50;
  // One DELETE of at most `batch` expired rows per table; each keeps its rows in flight.
  const statements: Record<keyof RetentionCutoffs, (before: Date) => RawBuilder<unknown>> = {
    sessions: (before) => sql`
      delete from sessions where id in (
        select s.id from sessions s
        where s.updated_at < ${before}
          and not exists (select 1 from runs r where r.session_id = s.id and (r.created_at >= ${before} or r.status in (${ACTIVE_RUNS})))
        limit ${batch})`,
    runs: (before) => sql`
      delete from runs where id in (
        select id from runs where status in (${FINAL_RUNS}) and finished_at < ${before} limit ${batch})`,
    cronRuns: (before) => sql`
      delete from cron_runs where id in (select id from cron_runs where status <> 'running' and finished_at < ${before} limit ${batch})`,
    outbound: (before) => sql`
      delete from outbound_messages where id in (
        select id from outbound_messages where status in ('sent', 'failed') and finished_at < ${before} limit ${batch})`,
    inbound: (before) => sql`
      delete from inbound_events where (platform, account_id, event_id) in (
        select platform, account_id, event_id from inbound_events where received_at < ${before} limit ${batch})`,
  };
  const counts: RetentionCounts = { sessions: 0, runs: 0, cronRuns: 0, outbound: 0, inbound: 0 };
  // Sessions first: their runs go with them, so the runs pass finds fewer.
  for (const table of Object.keys(statements) as Array<keyof RetentionCutoffs>) {
    const before = cutoffs[table];
    if (!before) continue;
    for (let i = 0; i < maxBatches; i++) {
      const n = Number((await statements[table](before).execute(db)).numAffectedRows ?? 0n);
      counts[table] += n;
      if (n < batch) break;
    }
  }
  return counts;
}
