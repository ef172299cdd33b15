// `npm start`: the standalone through scripts/start.mjs, which builds what is stale (a fresh
// clone, edited sources) and runs the compiled JavaScript, as the image does; the sources under
// tsx only when no build can be made (it says why). Kept as the standalone's own entry.
//
// A first start's slow steps overlap here instead of following each other (docs/benchmarks.md,
// "Issue 39: first `npm start`"): the new database's initdb runs in a child process while
// scripts/start.mjs transpiles and the standalone loads, the web UI's build in another while the
// standalone opens the database; the standalone waits for each where it needs it.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A child process; resolves when it is over, however it ended (the waiter checks what it made). */
function child(args, what) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    proc.once('error', (err) => {
      console.error(`${what} could not start: ${err.message}`);
      resolve(null);
    });
    proc.once('exit', (code) => resolve(code));
  });
}

/**
 * The folder the standalone will open when nothing configures another (no --config, no
 * AGENTRY_CONFIG, no ./config.yaml, no DATABASE_URL): `data.root_dir`'s default. Null otherwise:
 * then the database is made when the standalone opens it, as always.
 */
function defaultDataDir() {
  // eslint-disable-next-line no-restricted-syntax -- the entry point: what configures the standalone
  const { AGENTRY_CONFIG, DATABASE_URL, DATABASE_URL_FILE } = process.env;
  const args = process.argv.slice(2);
  const configured = args.some((a) => a === '-c' || a.startsWith('--config')) || AGENTRY_CONFIG || existsSync('config.yaml');
  if (configured || DATABASE_URL || DATABASE_URL_FILE) return null;
  return path.resolve('data', 'pgdata');
}

// PGlite's own initdb, into a folder beside the data folder, renamed into place when complete:
// the same as libs/db/src/pglite.ts does when it finds no database (which waits for this one).
const INITDB = `
const [entry, dir] = process.argv.slice(1);
const { PGlite } = await import(entry);
await (await PGlite.create(dir)).close();
`;
const dataDir = defaultDataDir();
if (dataDir && !existsSync(path.join(dataDir, 'PG_VERSION')) && (!existsSync(dataDir) || readdirSync(dataDir).length === 0)) {
  const making = `${dataDir}.initdb-${process.pid}`;
  rmSync(making, { recursive: true, force: true });
  // PGlite makes the folder it is given, not its parents.
  mkdirSync(path.dirname(dataDir), { recursive: true });
  const done = child(['--liftoff-only', '--input-type=module', '-e', INITDB, import.meta.resolve('@electric-sql/pglite'), making], 'initdb').then((code) => {
    try {
      if (code === 0) renameSync(making, dataDir);
    } catch {
      // The standalone finds no database and makes it itself, saying why if it cannot.
    } finally {
      rmSync(making, { recursive: true, force: true });
    }
  });
  globalThis[Symbol.for('agentry.initdb')] = { dataDir, done };
}

// The web UI (Vite, when missing or stale; milliseconds otherwise), after the initdb: the two
// together held ~900 MB at once, one after the other ~650 (initdb's ~550 MB, then Vite's while
// the standalone opens the database). main.ts waits for it before the gateway, which serves the
// build it finds when it starts.
const webUi = () => child([fileURLToPath(new URL('../../web/scripts/ensure-build.mjs', import.meta.url)), '--soft'], 'web UI build');
globalThis[Symbol.for('agentry.webUiBuild')] = (globalThis[Symbol.for('agentry.initdb')]?.done ?? Promise.resolve()).then(webUi);

process.argv.splice(2, 0, 'services/standalone/src/main.ts');
await import('../../../scripts/start.mjs');
