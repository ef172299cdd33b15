import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * A turn that failed or was stopped is kept in its session so the person who asked sees the
 * question, the partial answer and why it ended after a reload. `status` marks such rows
 * (`ok` for every completed turn, the default, so existing rows stay what they were); the model's
 * history reads only `ok` rows, so a failed turn is never context. `error` says why it ended.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('session_messages')
    .addColumn('status', 'text', (col) => col.notNull().defaultTo('ok'))
    .execute();
  await db.schema.alterTable('session_messages').addColumn('error', 'text').execute();
  await db.schema
    .alterTable('session_messages')
    .addCheckConstraint('session_messages_status_check', sql`status in ('ok', 'failed', 'stopped')`)
    .execute();
}

/** The older schema has no place for unfinished turns: they are dropped. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`delete from session_messages where status <> 'ok'`.execute(db);
  await db.schema.alterTable('session_messages').dropConstraint('session_messages_status_check').execute();
  await db.schema.alterTable('session_messages').dropColumn('error').execute();
  await db.schema.alterTable('session_messages').dropColumn('status').execute();
}
