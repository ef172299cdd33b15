import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { dumpPglite, migrateToLatest, migrationNames, openPglite, type DbHandle } from '@agentry/db';
import { openPostgres } from '@agentry/db/postgres';
import { postgresUrl } from './require-servers.js';
import { assertNotFastTier } from './tiers.js';
import { repoRoot } from './process.js';

export interface TestDatabase {
  url: string;
  handle: DbHandle;
  /** Closes the handle and drops the database. Idempotent. */
  drop(): Promise<void>;
}

/**
 * A new database `name` on the server `serverUrl` names, migrated to the latest schema (for
 * servers outside vitest's shared one: a private server, a benchmark's). `drop()` closes the
 * handle and drops the database with its sessions; it is idempotent, and a server that is gone
 * by then (`serverGone()`) is left alone.
 */
export async function createMigratedDatabase(
  serverUrl: string,
  name: string,
  opts: { poolMax?: number; connectTimeoutMs?: number; serverGone?: () => boolean } = {},
): Promise<TestDatabase> {
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  const id = pg.escapeIdentifier(name);
  await admin(`create database ${id}`);
  const url = withDatabase(serverUrl, name);
  const handle = openPostgres({ url, poolMax: opts.poolMax ?? 4, ...(opts.connectTimeoutMs ? { connectTimeoutMs: opts.connectTimeoutMs } : {}) });
  let dropping: Promise<void> | undefined;
  const drop = () =>
    (dropping ??= (async () => {
      await handle.close();
      if (!opts.serverGone?.()) await admin(`drop database if exists ${id} with (force)`);
    })());
  try {
    await migrateToLatest(handle.db);
  } catch (err) {
    await drop();
    throw err;
  }
  return { url, handle, drop };
}

// Any constant works; it only has to be the same in every vitest worker process.
const TEMPLATE_LOCK = 0x61676e74; // "agnt"

function withDatabase(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

async function withAdmin<T>(fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: postgresUrl() });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

async function databaseExists(admin: pg.Client, name: string): Promise<boolean> {
  const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [name]);
  return rowCount === 1;
}

/**
 * The migrated template, built once per set of migration names: a new migration gives a new
 * name, hence a rebuild. Built under another name and renamed when complete, so a worker that
 * died half-way never leaves a broken template behind.
 */
async function ensureTemplate(admin: pg.Client): Promise<string> {
  const hash = createHash('sha256').update(migrationNames().join('\n')).digest('hex').slice(0, 10);
  const template = `agentry_tpl_${hash}`;
  // Session-level lock on the admin connection: other workers queue here while one builds.
  await admin.query('select pg_advisory_lock($1)', [TEMPLATE_LOCK]);
  try {
    if (await databaseExists(admin, template)) return template;
    const building = `${template}_build`;
    const id = pg.escapeIdentifier(building);
    await admin.query(`drop database if exists ${id} with (force)`);
    await admin.query(`create database ${id}`);
    const handle = openPostgres({ url: withDatabase(postgresUrl(), building), poolMax: 1 });
    try {
      await migrateToLatest(handle.db);
    } finally {
      await handle.close();
    }
    await admin.query(`alter database ${id} rename to ${pg.escapeIdentifier(template)}`);
    // Cloning fails while anyone is connected to the template; refuse connections outright.
    await admin.query(`alter database ${pg.escapeIdentifier(template)} with allow_connections false`);
    return template;
  } finally {
    await admin.query('select pg_advisory_unlock($1)', [TEMPLATE_LOCK]);
  }
}

/**
 * A fresh database for one test file, cloned from the migrated template (or empty with
 * `{ migrated: false }`, for tests of migrating itself). Call `drop()` in afterAll.
 */
export async function createTestDatabase(opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  assertNotFastTier('createTestDatabase()');
  const name = `agentry_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withAdmin(async (admin) => {
    const template = opts.migrated === false ? 'template0' : await ensureTemplate(admin);
    await admin.query(`create database ${pg.escapeIdentifier(name)} template ${pg.escapeIdentifier(template)}`);
  });
  const url = withDatabase(postgresUrl(), name);
  const handle = openPostgres({ url, poolMax: 4 });
  let dropping: Promise<void> | undefined;
  return {
    url,
    handle,
    drop: () =>
      (dropping ??= (async () => {
        await handle.close();
        await withAdmin((admin) => admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`));
      })()),
  };
}

let snapshot: Promise<Blob> | undefined;
let remade = false;

/**
 * Where the migrated PGlite snapshot is kept between test processes: every test file runs in a
 * process of its own, and initdb plus the migrations cost each of them 3-10 s. Named by the
 * migrations' names and sources, so a changed migration makes a new one.
 */
function snapshotFile(): string {
  const hash = createHash('sha256').update(migrationNames().join('\n'));
  const dir = path.join(repoRoot, 'libs/db/src/migrations');
  for (const f of fs.readdirSync(dir).sort()) hash.update(f).update(fs.readFileSync(path.join(dir, f)));
  return path.join(os.tmpdir(), `agentry-pglite-migrated-${hash.digest('hex').slice(0, 16)}.tar`);
}

async function migratedSnapshot(): Promise<Blob> {
  const file = snapshotFile();
  try {
    return new Blob([fs.readFileSync(file)]);
  } catch {
    // Not made yet: made here, and kept for the next process.
  }
  const first = await openPglite({ dataDir: null });
  try {
    await migrateToLatest(first.db);
    const blob = await dumpPglite(first);
    // Written aside and renamed: a process that reads it never sees half a file.
    const part = `${file}.${process.pid}.part`;
    fs.writeFileSync(part, Buffer.from(await blob.arrayBuffer()));
    fs.renameSync(part, file);
    return blob;
  } finally {
    await first.close();
  }
}

/**
 * An in-memory PGlite database, migrated. The first call in a test run runs initdb and the
 * migrations and keeps a snapshot (in memory, and in the temp directory for the other test
 * processes); later calls start from it. Close it in afterAll.
 */
export async function createTestPglite(): Promise<DbHandle> {
  snapshot ??= migratedSnapshot();
  try {
    return await openPglite({ dataDir: null, loadDataDir: await snapshot });
  } catch (err) {
    // A snapshot file another PGlite version wrote, or a damaged one: made again, once.
    if (remade) throw err;
    remade = true;
    fs.rmSync(snapshotFile(), { force: true });
    snapshot = migratedSnapshot();
    return openPglite({ dataDir: null, loadDataDir: await snapshot });
  }
}
