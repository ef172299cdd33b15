import type { PGlite, parse, protocol } from '@electric-sql/pglite';
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

type BackendMessage = Awaited<ReturnType<PGlite['execProtocolStream']>>[number];
/**
 * PGlite's protocol writer and result parser, handed in by openPglite from the module it imports
 * when a PGlite database is opened (never imported here: cluster mode does not load PGlite).
 */
export interface PgliteProtocol {
  parse: typeof parse;
  protocol: typeof protocol;
}

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

/** Named statements the connection keeps at most; past that, statements run unnamed (as postgres.ts). */
const MAX_PREPARED = 200;
/**
 * A `*` other than `count(*)`: its result columns a migration can change, after which Postgres
 * refuses a prepared statement ("cached plan must not change result type"); never prepared, as
 * on the Postgres path (postgres.ts).
 */
const STAR = /(?<!\()\*/;

/** A statement parsed under a name: its parameters' types, which the serializers go by. */
interface Prepared {
  name: string;
  paramTypes: number[];
}

/**
 * One query in at most two calls into PGlite instead of its `query()`'s six (parse, describe,
 * bind, describe, execute, sync: each a pass through the WebAssembly backend and a parse of its
 * output), and with parameters under a name: parsed and planned once (a generic plan after a
 * few executions), then each execution one call of bind, describe, execute and sync. Every call
 * into PGlite's backend costs more than a socket round trip costs pg (docs/benchmarks.md, "Issue
 * 39: embedded mode CPU per run"). Values are serialized, and rows parsed, by PGlite's own
 * serializers and parsers, by the types the backend describes, as its `query()` does.
 */
class PgliteConnection implements DatabaseConnection {
  readonly #pglite: PGlite;
  readonly #parse: PgliteProtocol['parse'];
  readonly #serialize: PgliteProtocol['protocol']['serialize'];
  readonly #prepared = new Map<string, Prepared>();

  constructor(pglite: PGlite, protocol: PgliteProtocol) {
    this.#pglite = pglite;
    this.#parse = protocol.parse;
    this.#serialize = protocol.protocol.serialize;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const text = compiledQuery.sql;
    const parameters = compiledQuery.parameters;
    const pglite = this.#pglite;
    const result = await pglite.runExclusive(async () => {
      let messages: BackendMessage[];
      try {
        messages = await this.#run(text, parameters);
      } catch (err) {
        // As PGlite's query() reports a failed statement: what ran, beside Postgres' error.
        if (err instanceof Error && 'code' in err) Object.assign(err, { query: text, params: parameters, queryOptions: { rowMode: 'object' } });
        throw err;
      }
      // What PGlite's query() does after each statement (a no-op on a folder; IndexedDB and
      // OPFS builds persist here).
      await pglite.syncToFs();
      return this.#parse.parseResults(messages, pglite.parsers, { rowMode: 'object' })[0];
    });
    const command = result?.command?.toUpperCase();
    return {
      rows: (result?.rows ?? []) as R[],
      ...(command && AFFECTING_COMMANDS.has(command)
        ? { numAffectedRows: BigInt(result?.affectedRows ?? 0) }
        : {}),
    };
  }

  /** The backend's messages for one statement; a Postgres error thrown once the backend is ready again. */
  async #run(text: string, parameters: readonly unknown[]): Promise<BackendMessage[]> {
    const pglite = this.#pglite;
    const serialize = this.#serialize;
    const exec = (message: Uint8Array) => pglite.execProtocolStream(message, { syncToFs: false });
    if (parameters.length === 0) {
      return exec(concat([serialize.parse({ text }), serialize.bind({}), serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]));
    }
    let statement = this.#prepared.get(text);
    if (!statement) {
      const name = STAR.test(text) || this.#prepared.size >= MAX_PREPARED ? '' : `s${this.#prepared.size}`;
      let described: BackendMessage[];
      try {
        described = await exec(concat([serialize.parse({ name, text }), serialize.describe({ type: 'S', name })]));
      } catch (err) {
        // The backend skips everything up to a sync after an error.
        await exec(serialize.sync());
        throw err;
      }
      statement = { name, paramTypes: this.#parse.parseDescribeStatementResults(described) };
      if (name) this.#prepared.set(text, statement);
    }
    const values = parameters.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = pglite.serializers[statement.paramTypes[i]!];
      return serializer ? serializer(value) : String(value);
    });
    return exec(concat([serialize.bind({ statement: statement.name, values }), serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]));
  }

  // Not worth it: pg has no cursor configured either (pg-cursor is not installed), so code that
  // streams would work on one engine only. Fail loudly on both instead.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported by the PGlite dialect; page with limit/offset or keyset instead');
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
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

  constructor(pglite: PGlite, protocol: PgliteProtocol, logger: DbLogger | undefined) {
    this.#pglite = pglite;
    this.#logger = logger;
    this.#connection = new PgliteConnection(pglite, protocol);
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
  protocol: PgliteProtocol;
  logger?: DbLogger;
}

/** kysely dialect over one PGlite instance; SQL generation is kysely's Postgres dialect. */
export class PgliteDialect implements Dialect {
  readonly #config: PgliteDialectConfig;

  constructor(config: PgliteDialectConfig) {
    this.#config = config;
  }

  createDriver(): Driver {
    return new PgliteDriver(this.#config.pglite, this.#config.protocol, this.#config.logger);
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
