import type { Kysely } from 'kysely';
import type { Database } from './tables.js';

/** A database or a transaction: `Transaction<Database>` extends `Kysely<Database>`. */
export type Db = Kysely<Database>;

export interface DbHandle {
  db: Db;
  dialect: 'postgres' | 'pglite';
  /** Resolves once the database answers a query; throws otherwise. */
  ping(): Promise<void>;
  /** Waits for work in progress, then releases the pool or the PGlite instance. Idempotent. */
  close(): Promise<void>;
  /**
   * PGlite only: bytes of its WebAssembly memory (Postgres' shared buffers and backend heap live
   * there; it grows and never shrinks), for the `agentry_pglite_memory_bytes` gauge.
   */
  memoryBytes?(): number;
}
