import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Context compaction. A summary stands in for a session's older messages when its context would
 * outgrow the model's window; the originals stay (the UI and the messages API show them) and are
 * only marked `compacted_at`. A summary covers every message up to `through_message_id` and folds
 * in the summary before it, so the newest summary of a session is the one sent.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('session_messages').addColumn('compacted_at', 'timestamptz').execute();
  await db.schema
    .createTable('session_summaries')
    .addColumn('id', 'bigint', (col) => col.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
    .addColumn('content', 'text', (col) => col.notNull())
    .addColumn('through_message_id', 'bigint', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('session_summaries_session').on('session_summaries').columns(['session_id', 'id']).execute();
}

/** Without summaries every message is sent again (the history window still bounds it). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('session_summaries').execute();
  await db.schema.alterTable('session_messages').dropColumn('compacted_at').execute();
}
