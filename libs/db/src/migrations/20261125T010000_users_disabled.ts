import { type Kysely } from 'kysely';

// Migrations are frozen in time: they import kysely only, never table types or app code.

/**
 * Admins disable a user instead of deleting it when its history should stay: a disabled user
 * cannot log in and none of its credentials are accepted. Existing users stay enabled.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('users').addColumn('disabled', 'boolean', (col) => col.notNull().defaultTo(false)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('users').dropColumn('disabled').execute();
}
