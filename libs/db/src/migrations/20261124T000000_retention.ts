import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * What the retention sweep looks up by age: finished runs, finished cron fires, finished
 * outbound messages, and sessions by last activity. Partial where only finished rows are ever
 * deleted, so the indexes skip the rows in flight.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('runs_finished_at')
    .on('runs')
    .column('finished_at')
    .where(sql<boolean>`status in ('succeeded', 'failed', 'cancelled')`)
    .execute();
  await db.schema.createIndex('cron_runs_finished_at').on('cron_runs').column('finished_at').where(sql<boolean>`status <> 'running'`).execute();
  await db.schema
    .createIndex('outbound_messages_finished_at')
    .on('outbound_messages')
    .column('finished_at')
    .where(sql<boolean>`status in ('sent', 'failed')`)
    .execute();
  await db.schema.createIndex('sessions_updated_at').on('sessions').column('updated_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const index of ['sessions_updated_at', 'outbound_messages_finished_at', 'cron_runs_finished_at', 'runs_finished_at']) {
    await db.schema.dropIndex(index).execute();
  }
}
