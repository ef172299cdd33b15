import { Kysely, PostgresDialect, sql } from 'kysely';
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
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
