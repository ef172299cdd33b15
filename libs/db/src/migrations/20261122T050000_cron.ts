import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Cron jobs and their fires. A job belongs to an agent (deleting the agent deletes its jobs and
 * their history). `schedule` is six fields (second minute hour day month weekday), `timezone` an
 * IANA name. `deliver` is `{platform, accountId, chatId}` or null.
 *
 * One `cron_runs` row per fire. UNIQUE (cron_job_id, scheduled_at) is the exactly-once guarantee
 * at the database level: whichever replica inserts a tick's row first creates the run, and a
 * second delivery of the same tick inserts nothing. `run_id` names the `runs` row (no foreign
 * key: runs are pruned on their own schedule, the history stays).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cron_jobs')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('agent_id', 'text', (col) => col.notNull().references('rule_chains.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('schedule', 'text', (col) => col.notNull())
    .addColumn('message', 'text', (col) => col.notNull())
    .addColumn('timezone', 'text', (col) => col.notNull().defaultTo('UTC'))
    .addColumn('disabled', 'boolean', (col) => col.notNull().defaultTo(false))
    .addColumn('deliver', 'jsonb')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('last_run_at', 'timestamptz')
    .addColumn('last_status', 'text')
    .execute();
  await db.schema.createIndex('cron_jobs_agent').on('cron_jobs').columns(['agent_id', 'created_at']).execute();

  await db.schema
    .createTable('cron_runs')
    .addColumn('id', 'bigint', (col) => col.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('cron_job_id', 'text', (col) => col.notNull().references('cron_jobs.id').onDelete('cascade'))
    .addColumn('scheduled_at', 'timestamptz', (col) => col.notNull())
    .addColumn('run_id', 'text')
    .addColumn('started_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .addColumn('status', 'text', (col) => col.notNull().defaultTo('running').check(sql`status in ('running', 'succeeded', 'failed')`))
    .addColumn('output_excerpt', 'text')
    .addColumn('error', 'text')
    .addColumn('delivery_status', 'text')
    .addColumn('delivery_error', 'text')
    .addUniqueConstraint('cron_runs_job_tick', ['cron_job_id', 'scheduled_at'])
    .execute();
  // The sweep looks only at fires still waiting for their outcome.
  await db.schema
    .createIndex('cron_runs_running')
    .on('cron_runs')
    .columns(['started_at'])
    .where(sql.ref('status'), '=', 'running')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('cron_runs').execute();
  await db.schema.dropTable('cron_jobs').execute();
}
