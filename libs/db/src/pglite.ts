import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Kysely, sql } from 'kysely';
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

export async function openPglite(opts: OpenPgliteOptions): Promise<DbHandle> {
  // Imported here so that cluster mode never loads the WASM build.
  const { PGlite } = await import('@electric-sql/pglite');
  let dataDir: string | undefined;
  if (opts.dataDir !== null) {
    dataDir = path.resolve(opts.dataDir);
    await mkdir(dataDir, { recursive: true });
  }
  const started = performance.now();
  const pglite = await PGlite.create(dataDir, {
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((s) => ['-c', s])],
    ...(opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {}),
  });
  opts.logger?.debug(
    { dataDir: dataDir ?? 'memory', ms: Math.round(performance.now() - started) },
    'PGlite started',
  );
  const db = new Kysely<Database>({ dialect: new PgliteDialect({ pglite, logger: opts.logger }) });
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
