import { parseArgs } from 'node:util';
import path from 'node:path';
import { describeError } from './describe-error.js';
import type { DbHandle } from './handle.js';
import { MigrationError, migrateToLatest } from './migrate.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

export interface MigrateCommandIo {
  out(line: string): void;
  err(line: string): void;
}

const USAGE = 'usage: npm run migrate [-- --data-dir <folder>]   (DATABASE_URL, when set, wins)';

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparsable DATABASE_URL>';
  }
}

/** The migrate command without process access, so tests can run it in-process. Returns the exit code. */
export async function runMigrateCommand(
  argv: string[],
  env: { databaseUrl: string | undefined },
  io: MigrateCommandIo,
): Promise<number> {
  let handle: DbHandle | undefined;
  try {
    const { values } = parseArgs({
      args: argv,
      options: { 'data-dir': { type: 'string', default: './data/pgdata' }, help: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    });
    if (values.help) {
      io.out(USAGE);
      return 0;
    }
    if (env.databaseUrl) {
      io.out(`migrating ${redact(env.databaseUrl)}`);
      handle = openPostgres({ url: env.databaseUrl, poolMax: 1 });
    } else {
      const dataDir = path.resolve(values['data-dir']);
      io.out(`migrating PGlite folder ${dataDir}`);
      handle = await openPglite({ dataDir });
    }
    const { applied } = await migrateToLatest(handle.db);
    for (const name of applied) io.out(`applied ${name}`);
    if (applied.length === 0) io.out('already up to date');
    return 0;
  } catch (err) {
    // A MigrationError outside any migration only wraps the real cause (connection, lock table).
    const detail = err instanceof MigrationError && err.migration === undefined ? err.cause : err;
    io.err(`migrate failed: ${describeError(detail).replace(/\s*\n\s*/g, ' ')}`);
    return 1;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
