import type { Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Where a run's events go: the reply channel of the gateway process that waits for it (one
 * subscription per process instead of a SUBSCRIBE and UNSUBSCRIBE per chat). Null: the run's own
 * `run:<id>` channel (cron fires, channel messages, runs made before this column). On the row, not
 * in the job, so that a run the sweeper enqueues again still answers its client. Nullable without
 * a default: adding it rewrites nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').addColumn('reply_to', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').dropColumn('reply_to').execute();
}
