import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * A fire of a cron job whose agent is disabled starts no run and is recorded as `skipped`, with
 * the reason in `error`, so the job's history says why nothing happened. The status check gets
 * the new value (Postgres named the original constraint `cron_runs_status_check`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('cron_runs').dropConstraint('cron_runs_status_check').execute();
  await db.schema
    .alterTable('cron_runs')
    .addCheckConstraint('cron_runs_status_check', sql`status in ('running', 'succeeded', 'failed', 'skipped')`)
    .execute();
}

/** Skipped fires read as failed ones under the older check (the reason stays in `error`). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update cron_runs set status = 'failed' where status = 'skipped'`.execute(db);
  await sql`update cron_jobs set last_status = 'failed' where last_status = 'skipped'`.execute(db);
  await db.schema.alterTable('cron_runs').dropConstraint('cron_runs_status_check').execute();
  await db.schema.alterTable('cron_runs').addCheckConstraint('cron_runs_status_check', sql`status in ('running', 'succeeded', 'failed')`).execute();
}
