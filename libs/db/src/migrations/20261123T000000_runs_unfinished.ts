import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Runs not yet final, by age: the agent-workers' sweep looks for old ones (a run whose job was
 * lost must not stay queued or running for ever). Partial, so it holds only the few runs in
 * flight however long the table grows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('runs_unfinished_created')
    .on('runs')
    .column('created_at')
    .where(sql<boolean>`status in ('queued', 'running')`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('runs_unfinished_created').execute();
}
