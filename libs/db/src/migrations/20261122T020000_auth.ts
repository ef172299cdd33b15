import { sql, type Kysely } from 'kysely';

// Users and channel accounts. Secrets are never stored in clear: passwords as scrypt hashes,
// API keys as a SHA-256 lookup hash plus an AES-GCM sealed copy, platform secrets sealed.
// `file_hmac` remembers which configuration-file entry was last imported (keyed with the
// master key, so a dump reveals nothing about the entry).

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('username', 'text', (col) => col.primaryKey())
    .addColumn('password_hash', 'text', (col) => col.notNull())
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ('admin', 'user')`))
    .addColumn('api_key_hash', 'text', (col) => col.unique())
    .addColumn('api_key_sealed', 'text')
    .addColumn('token_version', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('file_hmac', 'text')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('channel_accounts')
    .addColumn('platform', 'text', (col) => col.notNull())
    .addColumn('id', 'text', (col) => col.notNull())
    .addColumn('name', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('enabled', 'boolean', (col) => col.notNull().defaultTo(true))
    .addColumn('settings', 'jsonb', (col) => col.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('secrets_sealed', 'text')
    .addColumn('api_key_hash', 'text', (col) => col.unique())
    .addColumn('file_hmac', 'text')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('channel_accounts_pk', ['platform', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('channel_accounts').execute();
  await db.schema.dropTable('users').execute();
}
