import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Channels: bindings of accounts to agents, the outbound message log, and the inbound event ids
 * seen (duplicate deliveries are dropped by them).
 *
 * `bindings` is an ordered list (`position`) replaced as a whole by `PUT /bindings`; deleting an
 * agent deletes its bindings. `outbound_messages` is the outbox of every send (API, agent
 * replies, the send_message tool, cron deliveries): a row is committed before its `channel-send`
 * job is enqueued, the connector claims it (`status = sending`, `claimed_until`), and it ends
 * `sent` (with the platform's message id) or `failed` (with the platform's message).
 * `parts_sent` lets a retry resume a long answer split into several platform messages.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('bindings')
    .addColumn('position', 'integer', (col) => col.primaryKey())
    .addColumn('agent_id', 'text', (col) => col.notNull().references('rule_chains.id').onDelete('cascade'))
    .addColumn('match_default', 'boolean', (col) => col.notNull().defaultTo(false))
    .addColumn('match_channel', 'text')
    .addColumn('match_account_id', 'text')
    .execute();

  await db.schema
    .createTable('outbound_messages')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('platform', 'text', (col) => col.notNull())
    .addColumn('account_id', 'text', (col) => col.notNull())
    .addColumn('chat_id', 'text', (col) => col.notNull())
    .addColumn('kind', 'text', (col) => col.notNull().check(sql`kind in ('text', 'image', 'file')`))
    .addColumn('payload', 'jsonb', (col) => col.notNull())
    .addColumn('source', 'text', (col) => col.notNull())
    .addColumn('run_id', 'text')
    .addColumn('status', 'text', (col) => col.notNull().defaultTo('queued').check(sql`status in ('queued', 'sending', 'sent', 'failed')`))
    .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('parts_sent', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('platform_message_id', 'text')
    .addColumn('error', 'text')
    .addColumn('next_attempt_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('claimed_until', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();
  // The connector's sweep looks only at messages not yet finished.
  await db.schema
    .createIndex('outbound_messages_pending')
    .on('outbound_messages')
    .columns(['next_attempt_at'])
    .where(sql.ref('status'), 'in', sql`('queued', 'sending')`)
    .execute();

  await db.schema
    .createTable('inbound_events')
    .addColumn('platform', 'text', (col) => col.notNull())
    .addColumn('account_id', 'text', (col) => col.notNull())
    .addColumn('event_id', 'text', (col) => col.notNull())
    .addColumn('run_id', 'text')
    .addColumn('received_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('inbound_events_pk', ['platform', 'account_id', 'event_id'])
    .execute();
  await db.schema.createIndex('inbound_events_received').on('inbound_events').columns(['received_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('inbound_events').execute();
  await db.schema.dropTable('outbound_messages').execute();
  await db.schema.dropTable('bindings').execute();
}
