import { sql, type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Model providers (OpenAI-compatible endpoints). The configuration file seeds them; the API
 * changes them. `model` is the default model name as written (may be empty: then the `models`
 * entry with alias `default`, else the first one); `models` is a JSON array of `{name, alias?,
 * context_window?}`. The API key is kept AES-GCM sealed, never in clear. `file_hmac` remembers
 * which file entry was last imported (keyed with the master key, so it reveals nothing).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('model_providers')
    .addColumn('id', 'text', (col) => col.primaryKey().check(sql`id ~ '^[A-Za-z0-9_-]{1,64}$'`))
    .addColumn('name', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('base_url', 'text', (col) => col.notNull().check(sql`base_url ~ '^https?://'`))
    .addColumn('model', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('models', 'jsonb', (col) => col.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('api_key_sealed', 'text')
    .addColumn('file_hmac', 'text')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('model_providers').execute();
}
