import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Who may chat with an agent besides its owner and the admins: `{everyone, users, roles,
 * apiAccounts}`. Rows made before this keep what they had (everyone may chat with every agent);
 * the gateway logs at start the ones shared that way that hold a dangerous power. Rule chains
 * carry the column too and ignore it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('rule_chains')
    .addColumn('audience', 'jsonb', (col) => col.notNull().defaultTo(sql`'{"everyone":true,"users":[],"roles":[],"apiAccounts":[]}'::jsonb`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('rule_chains').dropColumn('audience').execute();
}
