import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Who owns what. Agents and rule chains (`rule_chains.owner`) and cron jobs (`cron_jobs.owner`)
 * record the username that created them; rows made before this (file imports, the first
 * admin's work) belong to `admin`. Sessions record the principal that opened them
 * (`user:<name>`, `api:<account>`, or '' for channel and open-mode conversations), and the
 * principal joins the session's name: the same `sessionId` from two principals is two sessions.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('rule_chains').addColumn('owner', 'text', (col) => col.notNull().defaultTo('admin')).execute();
  await db.schema.alterTable('cron_jobs').addColumn('owner', 'text', (col) => col.notNull().defaultTo('admin')).execute();
  await db.schema.alterTable('sessions').addColumn('owner', 'text', (col) => col.notNull().defaultTo('')).execute();
  await db.schema.alterTable('sessions').dropConstraint('sessions_agent_channel_key').execute();
  await db.schema
    .alterTable('sessions')
    .addUniqueConstraint('sessions_agent_channel_owner_key', ['agent_id', 'channel', 'owner', 'session_key'])
    .execute();
  await db.schema.createIndex('sessions_owner').on('sessions').columns(['owner', 'updated_at']).execute();
  await db.schema.createIndex('cron_jobs_owner').on('cron_jobs').column('owner').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('cron_jobs_owner').execute();
  await db.schema.dropIndex('sessions_owner').execute();
  await db.schema.alterTable('sessions').dropConstraint('sessions_agent_channel_owner_key').execute();
  await sql`delete from sessions where owner <> ''`.execute(db);
  await db.schema.alterTable('sessions').addUniqueConstraint('sessions_agent_channel_key', ['agent_id', 'channel', 'session_key']).execute();
  await db.schema.alterTable('sessions').dropColumn('owner').execute();
  await db.schema.alterTable('cron_jobs').dropColumn('owner').execute();
  await db.schema.alterTable('rule_chains').dropColumn('owner').execute();
}
