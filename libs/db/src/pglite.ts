import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Kysely, sql } from 'kysely';
import { Errors } from '@agentry/errors';
import type { DbHandle } from './handle.js';
import type { DbLogger } from './logger.js';
import { PgliteDialect } from './pglite-dialect.js';
import type { Database } from './tables.js';

export interface OpenPgliteOptions {
  /** A folder (created if missing), or null for a throwaway in-memory database. */
  dataDir: string | null;
  logger?: DbLogger;
  /** Start from a dump made by `dumpPglite` instead of running initdb (tests: ~0.5 s instead of ~3 s). */
  loadDataDir?: Blob;
}

/**
 * Starts PGlite (initdb on a new folder takes seconds; reopening takes a fraction of one).
 * Only one process may open a folder at a time.
 */
const handles = new WeakMap<object, { dumpDataDir(compression?: 'none' | 'gzip' | 'auto'): Promise<File | Blob> }>();

/** A snapshot of a PGlite database that `openPglite({loadDataDir})` starts from. */
export async function dumpPglite(handle: DbHandle): Promise<Blob> {
  const pglite = handles.get(handle.db);
  if (!pglite) throw new Error('dumpPglite needs a handle opened by openPglite');
  return pglite.dumpDataDir('none');
}

/**
 * Postgres' defaults size a server shared by a hundred connections; PGlite is one backend in this
 * process, and every buffer it touches stays resident in its WebAssembly memory, which never
 * shrinks. 128 MB of shared buffers made PGlite hold ~150 MB after any start; the files behind it
 * sit in the kernel's page cache anyway (docs/benchmarks.md, "Memory of the embedded server").
 */
const PGLITE_SETTINGS = ['shared_buffers=16MB'];

/** `mod` is PGlite's Emscripten module (protected in its types); 0 once closed. */
function pgliteMemory(pglite: object): number {
  const mod = (pglite as { mod?: { wasmMemory?: { buffer: ArrayBuffer } } }).mod;
  return mod?.wasmMemory?.buffer.byteLength ?? 0;
}

/**
 * What the initdb child runs: PGlite's own initdb into the folder, then out. Plain JavaScript
 * given to `node -e`, so that it needs no build of its own; PGlite's entry comes as a URL.
 */
const INITDB_CHILD = `
const [entry, dir, ...settings] = process.argv.slice(1);
const { PGlite } = await import(entry);
const pg = await PGlite.create(dir, { startParams: [...PGlite.defaultStartParams, ...settings.flatMap((s) => ['-c', s])] });
await pg.close();
`;

/**
 * A new folder's database is made by a short-lived child process. PGlite's initdb runs a second
 * Postgres instance beside the first, copies that one's whole WebAssembly memory and writes it
 * back before each step, so a process that ran it held ~600 MB at its peak and ~256 MB for good
 * (WebAssembly memory never shrinks); the server that opens the made folder peaks at a restart's
 * ~190 MB (docs/benchmarks.md, "Issue 39: first `npm start`"). It is made beside the folder and
 * renamed into place, so that a start stopped half-way leaves no half-made database behind.
 */
async function initdbInChild(dataDir: string, logger: DbLogger | undefined): Promise<void> {
  // Files but no database: a start from before this one stopped half-way, or the wrong folder.
  if ((await readdir(dataDir)).length > 0) {
    throw new Errors.CONFIG(`could not create the embedded database in ${dataDir}: the folder is not empty but holds no database (move it away)`);
  }
  const started = performance.now();
  const making = `${dataDir}.initdb-${process.pid}`;
  await rm(making, { recursive: true, force: true });
  const entry = import.meta.resolve('@electric-sql/pglite');
  // --liftoff-only as `npm start` runs: PGlite's code compiled once, cheaply, never re-optimised.
  const child = spawn(process.execPath, ['--liftoff-only', '--input-type=module', '-e', INITDB_CHILD, entry, making, ...PGLITE_SETTINGS], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (c) => resolve(c));
  });
  try {
    if (code !== 0) {
      const why = stderr.trim().split('\n').slice(-3).join(' ') || `it exited with ${code}`;
      throw new Errors.CONFIG(`could not create the embedded database in ${dataDir}: ${why}`);
    }
    // Replaces the empty folder made for it (rename(2) does so for an empty directory).
    await rename(making, dataDir);
  } finally {
    await rm(making, { recursive: true, force: true });
  }
  logger?.info({ dataDir, ms: Math.round(performance.now() - started) }, 'embedded database created (initdb in a child process)');
}

export async function openPglite(opts: OpenPgliteOptions): Promise<DbHandle> {
  // Imported here so that cluster mode never loads the WASM build.
  const pgliteModule = import('@electric-sql/pglite');
  let dataDir: string | undefined;
  if (opts.dataDir !== null) {
    dataDir = path.resolve(opts.dataDir);
    await mkdir(dataDir, { recursive: true });
    if (!opts.loadDataDir && !existsSync(path.join(dataDir, 'PG_VERSION'))) await initdbInChild(dataDir, opts.logger);
  }
  const { PGlite, parse, protocol } = await pgliteModule;
  const started = performance.now();
  const pglite = await PGlite.create(dataDir, {
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((s) => ['-c', s])],
    ...(opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {}),
  });
  opts.logger?.debug(
    { dataDir: dataDir ?? 'memory', ms: Math.round(performance.now() - started) },
    'PGlite started',
  );
  const db = new Kysely<Database>({ dialect: new PgliteDialect({ pglite, protocol: { parse, protocol }, logger: opts.logger }) });
  let closing: Promise<void> | undefined;
  handles.set(db, pglite);
  return {
    db,
    dialect: 'pglite',
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => (closing ??= db.destroy()),
    memoryBytes: () => pgliteMemory(pglite),
  };
}
