import { createHash } from 'node:crypto';
import { Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { DbHandle } from './handle.js';
import type { DbLogger } from './logger.js';
import type { Database } from './tables.js';

const INT8_OID = 20;

/**
 * PGlite's own int8 parser, reproduced so that `count(*)` and bigint columns read the same on
 * both engines: a number when it fits, a bigint (not a lossy number) when it does not.
 */
function parseInt8(text: string): number | bigint {
  const n = BigInt(text);
  return n < BigInt(Number.MIN_SAFE_INTEGER) || n > BigInt(Number.MAX_SAFE_INTEGER) ? n : Number(n);
}

// Per pool, never pg.types.setTypeParser: other pg users in the same process keep pg's defaults.
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

export interface OpenPostgresOptions {
  url: string;
  poolMax?: number;
  /**
   * Longest wait for a connection (a new one, or a free one of a full pool); default 10 s. Past
   * it the query fails (a 503 at the gateway) instead of holding the request while the server
   * is unreachable.
   */
  connectTimeoutMs?: number;
  logger?: DbLogger;
  /**
   * Named prepared statements (default true): a statement is parsed and planned once per
   * connection, not on every execution. Off for a pooler that hands one client's statements to
   * several server connections (PgBouncer in transaction mode before 1.21, or without
   * `max_prepared_statements`).
   */
  prepare?: boolean;
}

/** Named statements one connection keeps at most; past that, statements run unnamed. */
const MAX_PREPARED_PER_CONNECTION = 200;
/**
 * A `*` other than `count(*)`: `select *` or `returning *`, whose result columns a migration can
 * change. Postgres refuses to run such a prepared statement after the change ("cached plan must
 * not change result type") on every connection that prepared it, so they are never prepared.
 * Statements that name their columns are replanned by Postgres after a migration by themselves.
 */
const STAR = /(?<!\()\*/;
/** SQL text -> statement name (null: run unnamed); bounded, cleared when full. */
const statementNames = new Map<string, string | null>();

function statementName(text: string, parameters: number): string | null {
  let name = statementNames.get(text);
  if (name !== undefined) return name;
  // Without parameters: BEGIN, COMMIT, DDL and the like, nothing to gain.
  name = parameters === 0 || STAR.test(text) ? null : `a_${createHash('sha1').update(text).digest('base64url')}`;
  if (statementNames.size >= 5000) statementNames.clear();
  statementNames.set(text, name);
  return name;
}

/**
 * The pool as Kysely sees it, its clients sending named statements: the first execution on a
 * connection parses it under its name, later ones only bind and execute it (one message less,
 * and no parse or plan on the server once Postgres keeps a generic plan).
 */
function preparingPool(pool: pg.Pool): PostgresPool {
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    const prepared = new Set<string>();
    function query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<pg.QueryResult<R & pg.QueryResultRow>>;
    function query<R>(cursor: unknown): R;
    function query(sqlOrCursor: unknown, parameters?: ReadonlyArray<unknown>): unknown {
      if (typeof sqlOrCursor !== 'string') return client.query(sqlOrCursor as pg.Submittable);
      const values = [...(parameters ?? [])];
      const name = statementName(sqlOrCursor, values.length);
      if (name && (prepared.has(name) || prepared.size < MAX_PREPARED_PER_CONNECTION)) {
        prepared.add(name);
        return client.query({ name, text: sqlOrCursor, values });
      }
      return client.query(sqlOrCursor, values);
    }
    return { query: query as PostgresPoolClient['query'], release: () => client.release() };
  };
  return {
    connect: async () => {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = wrap(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/** Opens a pooled connection; nothing connects until the first query (or `ping`). */
export function openPostgres(opts: OpenPostgresOptions): DbHandle {
  const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolMax ?? 10, connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000, types });
  // An idle client losing its server (restart, failover, admin kill) emits 'error' on the pool;
  // unhandled, that event would crash the process although the pool simply replaces the client.
  pool.on('error', (err) => {
    if (opts.logger) opts.logger.error({ err }, 'postgres pool: idle client error');
    else process.emitWarning(`postgres pool: idle client error: ${err.message}`);
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: opts.prepare === false ? pool : preparingPool(pool) }) });
  let closing: Promise<void> | undefined;
  return {
    db,
    dialect: 'postgres',
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => (closing ??= db.destroy()),
  };
}
