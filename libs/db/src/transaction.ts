import type { Db } from './handle.js';

/** Runs `fn` in a transaction: the caller's when `db` already is one, else a new one. */
export async function inTransaction<T>(db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : db.transaction().execute(fn);
}

/** Is this the driver error of a unique or primary-key violation (SQLSTATE 23505, both engines)? */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}
