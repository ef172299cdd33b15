import type { Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * What a model call was for: `chat` (a run's own calls: the agent, its sub-agents and chain
 * nodes) or `compaction` (the summary that replaces a session's older messages, asked for by the
 * run or by `POST /sessions/{id}/compact`). Compaction spends the same budget; the report tells
 * the two apart (`groupBy=kind`). Rows written before this are chat rows.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('run_usage').addColumn('kind', 'text', (col) => col.notNull().defaultTo('chat')).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('run_usage').dropColumn('kind').execute();
}
