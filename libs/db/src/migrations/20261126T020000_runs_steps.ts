import type { Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * The steps of a run whose agent runs as a rule chain (more than its `ai/agent` node): the
 * chain's trace (which node ran, with which relation, how long, and with `debugMode` what it
 * got and passed on), written with the run's finish so the canvas can replay it. Null for a
 * run of a lone `ai/agent` node and for runs made before this column. Nullable without a
 * default: adding it rewrites nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').addColumn('steps', 'jsonb').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').dropColumn('steps').execute();
}
