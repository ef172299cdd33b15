import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Agents, rule chains, skills and agent workspaces. Agents are rule chains of kind `agent`;
 * everything an agent owns (its rules, private skills, workspace entries; later cron jobs and
 * sessions) references it with ON DELETE CASCADE, so deleting the agent row removes it all.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rule_chains')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('kind', 'text', (col) => col.notNull().check(sql`kind in ('agent', 'rule')`))
    // Agent-level rules name their agent; agents and global rules carry null.
    .addColumn('agent_id', 'text', (col) => col.references('rule_chains.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('category', 'text')
    // json, not jsonb: the DSL comes back exactly as it was written (key order included).
    .addColumn('dsl', 'json', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('rule_chains_agent_owns_rules_only', sql`kind = 'rule' or agent_id is null`)
    .execute();
  await db.schema.createIndex('rule_chains_agent_id').on('rule_chains').column('agent_id').execute();
  await db.schema.createIndex('rule_chains_kind').on('rule_chains').columns(['kind', 'id']).execute();

  await db.schema
    .createTable('skills')
    .addColumn('id', 'bigint', (col) => col.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('scope', 'text', (col) => col.notNull().check(sql`scope in ('global', 'local')`))
    .addColumn('agent_id', 'text', (col) => col.references('rule_chains.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('description', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('content', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('status', 'text', (col) => col.notNull().defaultTo('active').check(sql`status in ('active', 'draft')`))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('skills_scope_agent', sql`(scope = 'global') = (agent_id is null)`)
    .execute();
  // Two partial indexes rather than one over (scope, agent_id, name): NULLs never collide.
  await db.schema.createIndex('skills_global_name').on('skills').column('name').unique().where(sql.ref('scope'), '=', 'global').execute();
  await db.schema
    .createIndex('skills_local_name')
    .on('skills')
    .columns(['agent_id', 'name'])
    .unique()
    .where(sql.ref('scope'), '=', 'local')
    .execute();

  await db.schema
    .createTable('workspace_entries')
    .addColumn('agent_id', 'text', (col) => col.notNull().references('rule_chains.id').onDelete('cascade'))
    // Normalised, relative, no leading slash; the root ('') is implicit and never stored.
    .addColumn('path', 'text', (col) => col.notNull().check(sql`path <> ''`))
    // The directory holding the entry ('' for the root), so listing one directory is an index lookup.
    .addColumn('parent', 'text', (col) => col.notNull())
    .addColumn('is_dir', 'boolean', (col) => col.notNull())
    .addColumn('content', 'bytea')
    .addColumn('size', 'bigint', (col) => col.notNull().defaultTo(0))
    .addColumn('mod_time', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('workspace_entries_pkey', ['agent_id', 'path'])
    .execute();
  await db.schema.createIndex('workspace_entries_parent').on('workspace_entries').columns(['agent_id', 'parent']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('workspace_entries').execute();
  await db.schema.dropTable('skills').execute();
  await db.schema.dropTable('rule_chains').execute();
}
