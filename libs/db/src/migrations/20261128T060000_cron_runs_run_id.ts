import type { Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * A fire's record is completed from its run's side (the worker when the run ends, the connector
 * when its answer is delivered): both find the `cron_runs` row by `run_id`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('cron_runs_run_id').on('cron_runs').column('run_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('cron_runs_run_id').execute();
}
