// Builds the web UI (Vite, into services/web/build/) when it is missing or older than its
// sources; otherwise exits in a few milliseconds. `npm start` runs it beside its start and the
// browser tests run it before they start; `--force` always builds. Plain JavaScript so that the
// up-to-date check costs only a bare `node` start. Concurrent callers (parallel test files)
// serialise on a lock directory: the first builds, the others wait and then find it fresh.
//
//   node services/web/scripts/ensure-build.mjs [--force] [--quiet] [--soft]
//
// --soft (npm start): a failed build (broken UI sources, or Vite absent from a production
// install) is reported but exits 0, so that the API still starts; the gateway then serves the
// previous build, or logs that there is none.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const webDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const buildDir = path.join(webDir, 'build');
const lockDir = path.join(webDir, '.build-lock');
/** Everything the bundle is made from (the lock file: a dependency changed; the API client is bundled in). */
const SOURCES = ['index.html', 'vite.config.ts', 'package.json', 'app', 'public', '../../libs/client/src', '../../package-lock.json'];
const STALE_LOCK_MS = 5 * 60_000;
const WAIT_MS = 3 * 60_000;

/** @param {string} p @returns {number} */
function newestMtime(p) {
  const stat = fs.statSync(p, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const name of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, name)));
  return newest;
}

/** Why the UI must be built, or null when build/index.html is newer than every source. */
function staleReason() {
  const built = fs.statSync(path.join(buildDir, 'index.html'), { throwIfNoEntry: false });
  if (!built) return 'no build yet';
  const sources = Math.max(...SOURCES.map((s) => newestMtime(path.join(webDir, s))));
  return sources > built.mtimeMs ? 'sources changed since the last build' : null;
}

/** @template T @param {() => Promise<T>} fn @returns {Promise<T>} */
async function withLock(fn) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      break;
    } catch (err) {
      if (/** @type {NodeJS.ErrnoException} */ (err).code !== 'EEXIST') throw err;
      const age = Date.now() - (fs.statSync(lockDir, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > STALE_LOCK_MS) fs.rmSync(lockDir, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`another build of the web UI holds ${lockDir}; remove it if none runs`);
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

const force = process.argv.includes('--force');
const quiet = process.argv.includes('--quiet');
const soft = process.argv.includes('--soft');
const started = Date.now();
try {
  if (force || staleReason() !== null) {
    await withLock(async () => {
      // Another process may have built it while this one waited.
      const reason = force ? 'forced' : staleReason();
      if (reason === null) return;
      // The production bundle whatever NODE_ENV the caller runs with (vitest sets `test`, which
      // would make Vite pick development builds of React and friends).
      // eslint-disable-next-line no-restricted-syntax -- a build tool sets its own environment
      process.env.NODE_ENV = 'production';
      const { build } = await import('vite');
      await build({ configFile: path.join(webDir, 'vite.config.ts'), logLevel: 'warn' });
      if (!quiet) console.log(`web UI built into ${path.relative(process.cwd(), buildDir) || buildDir} in ${((Date.now() - started) / 1000).toFixed(1)} s (${reason})`);
    });
  }
} catch (err) {
  console.error(`web UI build failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  if (soft) console.error('continuing without a fresh web UI (run `npm run build` to see the error again)');
  else process.exitCode = 1;
}
