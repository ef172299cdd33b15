import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Conversations and runs. A session belongs to an agent and is named by the client's
 * `sessionId` (or a channel-derived key); its messages are appended only when a run completes,
 * in one transaction, so a failed or cancelled run leaves no half turn. A run row is committed
 * before its job is enqueued (outbox rule): the job carries only the run id. `seq` orders runs
 * of one session in arrival order.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('agent_id', 'text', (col) => col.notNull().references('rule_chains.id').onDelete('cascade'))
    .addColumn('session_key', 'text', (col) => col.notNull())
    .addColumn('channel', 'text', (col) => col.notNull().defaultTo('api'))
    .addColumn('scope', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('title', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('message_count', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('sessions_agent_channel_key', ['agent_id', 'channel', 'session_key'])
    .execute();

  await db.schema
    .createTable('session_messages')
    .addColumn('id', 'bigint', (col) => col.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ('system', 'user', 'assistant', 'tool')`))
    .addColumn('content', 'text', (col) => col.notNull())
    .addColumn('tool_calls', 'jsonb')
    .addColumn('tool_call_id', 'text')
    .addColumn('name', 'text')
    .addColumn('run_id', 'text')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('session_messages_session').on('session_messages').columns(['session_id', 'id']).execute();

  await db.schema
    .createTable('runs')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('seq', 'bigint', (col) => col.notNull().generatedAlwaysAsIdentity())
    .addColumn('agent_id', 'text', (col) => col.notNull().references('rule_chains.id').onDelete('cascade'))
    .addColumn('session_id', 'text', (col) => col.references('sessions.id').onDelete('cascade'))
    .addColumn('source', 'text', (col) => col.notNull().defaultTo('api'))
    .addColumn('status', 'text', (col) =>
      col.notNull().defaultTo('queued').check(sql`status in ('queued', 'running', 'succeeded', 'failed', 'cancelled')`),
    )
    .addColumn('request', 'jsonb', (col) => col.notNull())
    .addColumn('output', 'text')
    .addColumn('error', 'text')
    .addColumn('usage', 'jsonb')
    .addColumn('streamed', 'boolean', (col) => col.notNull().defaultTo(false))
    .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('runs_session_seq').on('runs').columns(['session_id', 'seq']).execute();
  await db.schema.createIndex('runs_agent_created').on('runs').columns(['agent_id', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('runs').execute();
  await db.schema.dropTable('session_messages').execute();
  await db.schema.dropTable('sessions').execute();
}
