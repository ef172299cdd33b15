import { sql } from 'kysely';
import type { Db } from './handle.js';

/** Runs `fn` in a transaction: the caller's when `db` already is one, else a new one. */
export async function inTransaction<T>(db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : db.transaction().execute(fn);
}

/**
 * Runs `fn` in a transaction that holds a Postgres advisory lock named `name` until it ends, so
 * processes doing the same start-up work (two gateways seeding users) do it one after the other:
 * the second then sees what the first wrote instead of writing it again.
 */
export async function inLockedTransaction<T>(db: Db, name: string, fn: (trx: Db) => Promise<T>): Promise<T> {
  return inTransaction(db, async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtext(${name}))`.execute(trx);
    return fn(trx);
  });
}

/** The SQLSTATE of a driver error: pg and PGlite both set it as `code`. */
function sqlState(err: unknown): unknown {
  return typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
}

/** Is this the driver error of a unique or primary-key violation (SQLSTATE 23505, both engines)? */
export function isUniqueViolation(err: unknown): boolean {
  return sqlState(err) === '23505';
}

/**
 * Is this the driver error of a foreign-key violation (SQLSTATE 23503, both engines)? A row
 * refers to one that does not exist, most often because it was deleted meanwhile.
 */
export function isForeignKeyViolation(err: unknown): boolean {
  return sqlState(err) === '23503';
}
