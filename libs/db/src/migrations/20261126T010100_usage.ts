import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Who used how many tokens. Each model call of a run adds a `run_usage` row (the provider that
 * answered, the model, its prompt and completion tokens), with the run's agent and principal
 * copied in so that totals need no join and outlive the run rows that retention deletes (hence
 * no foreign key). A run records its principal (`user:<name>`, `api:<account>`, '' as sessions
 * store it) because a chat without a session has no other trace of who asked. A user's budget
 * (`{tokensPerDay, requestsPerMinute}`) is a JSON column; an api account keeps its own in the
 * account's settings like its other fields.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('run_usage')
    .addColumn('id', 'bigint', (col) => col.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('run_id', 'text', (col) => col.notNull())
    .addColumn('agent_id', 'text', (col) => col.notNull())
    .addColumn('principal', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('provider', 'text', (col) => col.notNull())
    .addColumn('model', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('prompt_tokens', 'bigint', (col) => col.notNull().defaultTo(0))
    .addColumn('completion_tokens', 'bigint', (col) => col.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('run_usage_created').on('run_usage').column('created_at').execute();
  await db.schema.createIndex('run_usage_principal').on('run_usage').columns(['principal', 'created_at']).execute();
  await db.schema.alterTable('runs').addColumn('principal', 'text', (col) => col.notNull().defaultTo('')).execute();
  await db.schema.alterTable('users').addColumn('budget', 'jsonb').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('users').dropColumn('budget').execute();
  await db.schema.alterTable('runs').dropColumn('principal').execute();
  await db.schema.dropTable('run_usage').execute();
}
