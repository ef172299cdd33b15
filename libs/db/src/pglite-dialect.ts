import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type { DbLogger } from './logger.js';

/** FIFO lock: PGlite is a single backend, so a kysely "connection" is the whole database. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();

  lock(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.#tail;
    this.#tail = previous.then(() => held);
    return previous.then(() => release);
  }
}

const AFFECTING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

class PgliteConnection implements DatabaseConnection {
  readonly #pglite: PGlite;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#pglite.query<R>(compiledQuery.sql, [...compiledQuery.parameters], {
      rowMode: 'object',
    });
    const command = result.command?.toUpperCase();
    return {
      rows: result.rows,
      ...(command && AFFECTING_COMMANDS.has(command)
        ? { numAffectedRows: BigInt(result.rowCount ?? result.affectedRows ?? 0) }
        : {}),
    };
  }

  // Not worth it: pg has no cursor configured either (pg-cursor is not installed), so code that
  // streams would work on one engine only. Fail loudly on both instead.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported by the PGlite dialect; page with limit/offset or keyset instead');
  }
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

const SLOW_ACQUIRE_MS = 5_000;

class PgliteDriver implements Driver {
  readonly #pglite: PGlite;
  readonly #logger: DbLogger | undefined;
  readonly #connection: PgliteConnection;
  readonly #mutex = new Mutex();
  #release: (() => void) | undefined;
  #destroyed = false;

  constructor(pglite: PGlite, logger: DbLogger | undefined) {
    this.#pglite = pglite;
    this.#logger = logger;
    this.#connection = new PgliteConnection(pglite);
  }

  async init(): Promise<void> {
    await this.#pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#destroyed) throw new Error('PGlite database is closed');
    // On pg a query issued on `db` while a transaction is open just takes another pooled
    // connection; here it waits for the transaction, and forever if the transaction awaits it.
    // Say so instead of hanging silently.
    const slow = setTimeout(() => {
      this.#logger?.warn(
        `waited ${SLOW_ACQUIRE_MS} ms for the PGlite connection: is a query using db instead of the open transaction?`,
      );
    }, SLOW_ACQUIRE_MS);
    slow.unref();
    try {
      this.#release = await this.#mutex.lock();
    } finally {
      clearTimeout(slow);
    }
    if (this.#destroyed) {
      this.#release();
      throw new Error('PGlite database is closed');
    }
    return this.#connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let statement = 'begin';
    if (settings.isolationLevel) statement += ` isolation level ${settings.isolationLevel}`;
    if (settings.accessMode) statement += ` ${settings.accessMode}`;
    await connection.executeQuery(CompiledQuery.raw(statement));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdent(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdent(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdent(name)}`));
  }

  async releaseConnection(): Promise<void> {
    const release = this.#release;
    this.#release = undefined;
    try {
      // A raw `begin` through db.connection() that was never ended would otherwise leak its
      // open transaction into whoever acquires the connection next.
      if (this.#pglite.isInTransaction()) {
        this.#logger?.warn('PGlite connection released inside an open transaction; rolling it back');
        await this.#pglite.query('rollback');
      }
    } finally {
      release?.();
    }
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    // Let the holder and everyone already queued finish, then refuse newcomers.
    const release = await this.#mutex.lock();
    this.#destroyed = true;
    try {
      if (!this.#pglite.closed) await this.#pglite.close();
    } finally {
      release();
    }
  }
}

export interface PgliteDialectConfig {
  pglite: PGlite;
  logger?: DbLogger;
}

/** kysely dialect over one PGlite instance; SQL generation is kysely's Postgres dialect. */
export class PgliteDialect implements Dialect {
  readonly #config: PgliteDialectConfig;

  constructor(config: PgliteDialectConfig) {
    this.#config = config;
  }

  createDriver(): Driver {
    return new PgliteDriver(this.#config.pglite, this.#config.logger);
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }

  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
