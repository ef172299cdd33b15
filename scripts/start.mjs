// Starts an Agentry entry point as compiled JavaScript, as the image runs it: `npm start`,
// `npm run start:*`, `npm run cluster` and the benches go through here.
//
//   node scripts/start.mjs <package dir>/src/<file>.ts [args...]
//   node scripts/start.mjs --build-only <entry>...   # build what is stale, start nothing
//   node scripts/start.mjs --bundle <entry> [args...] # run its bundle when one is up to date
//   node scripts/start.mjs --bundle-only <entry>      # make the bundle (what --bundle leaves running)
//
// When the dist/ of the entry's package, or of a workspace package it depends on, is missing or
// older than its src/ (a fresh clone, sources edited since the last build), those packages are
// transpiled first with esbuild (about a second; `npm run build`, tsc -b, checks types and makes
// the same files). Compiled, a process skips transpiling every module at start and runs plain V8
// code (docs/benchmarks.md measures the difference). Only when nothing can be transpiled (a
// syntax error mid-edit) does it run the sources under tsx, and says why. Plain JavaScript so
// that the up-to-date check costs a bare `node` start and a stat per file.
//
// With --bundle (`npm start`), the entry runs from one esbuild bundle of its compiled files and
// their dependencies once one is up to date: a restart then loads one file instead of ~2,000
// modules (docs/benchmarks.md, "Issue 39: start-up phases"). A start that finds none runs dist/
// as before and, once it serves, leaves a low-priority child making it for the next one, so that
// a first start does not wait for it. AGENTRY_NO_BUNDLE=1 runs dist/ (stack traces through its
// source maps). The image does not come here: it runs dist/ as tsc -b built it.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { setPriority } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

const { createRequire, register } = nodeModule;
const root = new URL('../', import.meta.url);
// V8's compiled code of every module loaded from here on (ours and the dependencies') is kept on
// disk and reused while the file is unchanged (Node checks a hash of the source): a restart
// compiles nothing it compiled before. Node >= 22.1 (the pinned one); older ones lack the call. A
// cache that cannot be written (a read-only tree) only makes Node skip it.
nodeModule.enableCompileCache?.(fileURLToPath(new URL('node_modules/.cache/agentry/compile/', root)));
const BUNDLE_DIR = 'dist/bundle/';
/** Written by a transpile-only build: dist/ matches src/ as of its mtime (tsc's .tsbuildinfo says the same for a full build). */
const TRANSPILED = 'dist/.transpiled';
const rootPath = fileURLToPath(root);

/** dist/ of the package was built (by tsc, or transpiled for a start) after the last change to its src/. */
function built(pkg) {
  const src = new URL('src/', pkg);
  if (!existsSync(src)) return true;
  const marks = ['dist/.tsbuildinfo', TRANSPILED].map((m) => new URL(m, pkg)).filter((m) => existsSync(m));
  if (marks.length === 0) return false;
  const at = Math.max(...marks.map((m) => statSync(m).mtimeMs));
  return readdirSync(src, { recursive: true }).every((f) => statSync(new URL(String(f), src)).mtimeMs <= at);
}

/** Workspace package name -> its directory URL. */
function workspaces() {
  const dirs = new Map();
  for (const dir of ['libs/', 'services/']) {
    for (const d of readdirSync(new URL(dir, root), { withFileTypes: true })) {
      const manifest = new URL(`${dir}${d.name}/package.json`, root);
      if (d.isDirectory() && existsSync(manifest)) dirs.set(JSON.parse(readFileSync(manifest, 'utf8')).name, new URL(`${dir}${d.name}/`, root));
    }
  }
  return dirs;
}

/** The package at `pkgDir` and every workspace package it depends on, directly or not. */
function closure(pkgDir) {
  const dirs = workspaces();
  const seen = new Map();
  const visit = (dir) => {
    if (seen.has(dir.href)) return;
    seen.set(dir.href, dir);
    const { dependencies = {} } = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8'));
    for (const dep of Object.keys(dependencies)) if (dirs.has(dep)) visit(dirs.get(dep));
  };
  visit(pkgDir);
  return [...seen.values()];
}

const rel = (url) => fileURLToPath(url).slice(rootPath.length).replace(/\/$/, '');

/** esbuild, which tsx brings (a dependency of every install), or null. */
async function loadEsbuild() {
  try {
    const fromTsx = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'));
    return await import(pathToFileURL(fromTsx.resolve('esbuild')).href);
  } catch {
    return null;
  }
}

/**
 * Transpiles the stale packages' sources to dist/ with esbuild, one file to one file as tsc lays
 * them out (dist/src/...), without type checks: about a second instead of tsc's half minute from
 * nothing, which is what a first `npm start` waited for. Types are checked by `npm test` and
 * `npm run build` (tsc -b, which the image uses and which rewrites the same files). The sources
 * use `verbatimModuleSyntax` and `isolatedModules`, so a file needs nothing from another to be
 * transpiled right. esbuild comes with tsx (a dependency of every install). The reason it could
 * not, or null.
 */
async function build(pkgDirs, why) {
  const esbuild = await loadEsbuild();
  if (esbuild === null) return 'esbuild (which tsx brings) is not installed';
  const started = Date.now();
  console.error(`agentry: transpiling ${pkgDirs.map(rel).join(', ')} first (${why}); it starts once that is done`);
  try {
    for (const pkgDir of pkgDirs) {
      const src = new URL('src/', pkgDir);
      const files = readdirSync(src, { recursive: true })
        .map(String)
        .filter((f) => /\.(ts|mts)$/.test(f) && !f.endsWith('.d.ts'))
        .map((f) => fileURLToPath(new URL(f, src)));
      await esbuild.build({
        entryPoints: files,
        outdir: fileURLToPath(new URL('dist/src/', pkgDir)),
        outbase: fileURLToPath(src),
        format: 'esm',
        platform: 'node',
        target: 'node20',
        sourcemap: true,
        logLevel: 'error',
      });
      writeFileSync(new URL(TRANSPILED, pkgDir), `${new Date().toISOString()}\n`);
    }
  } catch (err) {
    return `transpiling failed (${err.message.split('\n')[0]})`;
  }
  console.error(`agentry: transpiled in ${((Date.now() - started) / 1000).toFixed(1)} s (types unchecked: \`npm run build\` checks them)`);
  return null;
}

/** Where an entry's package and compiled file are; exits with usage for anything else. */
function locate(entry) {
  const m = entry ? /^(.*)\/src\/(.+)\.ts$/.exec(entry) : null;
  if (!m || !existsSync(new URL(entry, root))) {
    console.error('usage: node scripts/start.mjs [--build-only | --bundle | --bundle-only] <package>/src/<file>.ts [args...]');
    process.exit(2);
  }
  return { pkgDir: new URL(`${m[1]}/`, root), dist: new URL(`${m[1]}/dist/src/${m[2]}.js`, root) };
}

/** Builds the entry's packages when stale; the reason it could not, or null when dist/ is usable. */
async function ensureBuilt(entry) {
  const { pkgDir, dist } = locate(entry);
  const stale = closure(pkgDir).filter((p) => !built(p) || !existsSync(new URL('dist/src/', p)));
  if (!existsSync(dist) && !stale.some((p) => p.href === pkgDir.href)) stale.push(pkgDir);
  const why = !existsSync(dist) ? 'there is no build yet' : stale.length > 0 ? `the build is older than the sources of ${stale.map(rel).join(', ')}` : null;
  return why === null ? null : build(stale, why);
}

/** Where the entry's bundle and the list of files it was made from go. */
function bundlePaths(entry) {
  const { pkgDir } = locate(entry);
  const name = /([^/]+)\.ts$/.exec(entry)[1];
  const dir = new URL(BUNDLE_DIR, pkgDir);
  return { dir, file: new URL(`${name}.mjs`, dir), inputs: new URL(`${name}.inputs.json`, dir) };
}

/**
 * The bundle's URL when it is newer than every file of this checkout it was made from and than
 * the last `npm install` (which rewrites node_modules/.package-lock.json; packages' own files
 * carry npm's fixed 1985 mtime, so they cannot tell), else null. One stat per workspace file
 * (~400), as for the sources. A bundle that could not be made is listed as failed, so that it is
 * not tried again until something it reads changes.
 */
function freshBundle(entry) {
  const { file, inputs } = bundlePaths(entry);
  if (!existsSync(file) || !existsSync(inputs)) return null;
  try {
    const at = statSync(file).mtimeMs;
    const list = JSON.parse(readFileSync(inputs, 'utf8'));
    if (list.failed || statSync(inputs).mtimeMs > at) return null;
    const lock = new URL('node_modules/.package-lock.json', root);
    if (existsSync(lock) && statSync(lock).mtimeMs > at) return null;
    return list.files.every((f) => statSync(new URL(f, root)).mtimeMs <= at) ? file : null;
  } catch {
    return null;
  }
}

/** True when the last attempt failed and nothing it read has changed since (so: do not retry). */
function bundleFailedBefore(entry) {
  const { inputs } = bundlePaths(entry);
  try {
    const list = JSON.parse(readFileSync(inputs, 'utf8'));
    const at = statSync(inputs).mtimeMs;
    return list.failed === true && list.files.every((f) => statSync(new URL(f, root)).mtimeMs <= at);
  } catch {
    return false;
  }
}

/**
 * Rewrites `import.meta.url` in each bundled file to that file's own URL, so that a module which
 * finds things beside itself (the web UI's build, the gateway's package.json) finds them where it
 * did before it was bundled.
 */
const keepOwnUrl = {
  name: 'keep-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.(m|c)?js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      return { contents: text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)), loader: 'js' };
    });
  },
};

/**
 * The Postgres and Redis halves of our packages, which only a server given DATABASE_URL or
 * REDIS_URL loads (on demand). Bundled, esbuild hoists their imports of node-postgres, BullMQ and
 * ioredis (left out, see makeBundle) to the bundle's top, and every embedded start loaded them.
 * Left out, a bundle would load them as separate copies of our packages beside its own: so such a
 * server runs dist/ instead (usesBundle).
 */
const CLUSTER_ONLY = ['@agentry/db/postgres', '@agentry/bus/redis'];

/**
 * Leaves packages that are only imported on demand (`import('pkg')`: tiktoken's rank tables, the
 * MCP client, the OpenTelemetry SDK) to load from node_modules when they are asked for: bundled,
 * their source (4.5 MB of rank tables alone) would be read and held at every start. Our own
 * packages stay in, so that no module of ours exists twice, but for CLUSTER_ONLY.
 */
const onDemandStaysOut = {
  name: 'on-demand-stays-out',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.kind === 'dynamic-import' && (!args.path.startsWith('@agentry/') || CLUSTER_ONLY.includes(args.path)) ? { path: args.path, external: true } : undefined,
    );
  },
};

/** The bundle is for the embedded database and bus; with either URL set (or read from a file) the server runs dist/. */
function usesBundle(env) {
  return !env.AGENTRY_NO_BUNDLE && !['DATABASE_URL', 'DATABASE_URL_FILE', 'REDIS_URL', 'REDIS_URL_FILE'].some((k) => env[k]);
}

/**
 * Bundles the entry's compiled file with everything it imports into one ES module. Left out, as
 * ordinary imports from node_modules: packages that load files beside themselves at run time
 * (PGlite's and quickjs' WebAssembly), native ones, the on-demand and cluster-only ones above, and
 * what only those import (BullMQ, ioredis, node-postgres; listed too, so that a static import of
 * one added elsewhere stays out). Written beside and renamed into place; its mtime is set to
 * when it began, so that a file edited meanwhile makes it stale.
 */
async function makeBundle(entry) {
  const { dist } = locate(entry);
  const { dir, file, inputs } = bundlePaths(entry);
  const began = new Date();
  const esbuild = await loadEsbuild();
  if (esbuild === null) return;
  mkdirSync(dir, { recursive: true });
  const tmp = (u) => new URL(`${u.href}.${process.pid}.tmp`);
  const relToRoot = (p) => p.slice(rootPath.length);
  let files = [];
  let failed = false;
  try {
    const result = await esbuild.build({
      entryPoints: [fileURLToPath(dist)],
      outfile: fileURLToPath(tmp(file)),
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node22',
      external: ['@electric-sql/pglite', 'quickjs-emscripten', 'bullmq', 'ioredis', 'pg', 'pg-native', 'msgpackr-extract', 'vite'],
      // CommonJS dependencies call require(); an ES module has none of its own.
      banner: { js: "import { createRequire as __agentryRequire } from 'node:module'; const require = __agentryRequire(import.meta.url);" },
      plugins: [onDemandStaysOut, keepOwnUrl],
      metafile: true,
      logLevel: 'silent',
    });
    files = Object.keys(result.metafile.inputs)
      .map((f) => fileURLToPath(new URL(f, pathToFileURL(`${process.cwd()}/`))))
      .filter((f) => f.startsWith(rootPath) && !f.includes('/node_modules/'))
      .map(relToRoot)
      // This file decides how the bundle is made: an edit to it makes a new one.
      .concat(relToRoot(fileURLToPath(import.meta.url)));
  } catch {
    failed = true;
    files = readdirSync(new URL('dist/src/', locate(entry).pkgDir), { recursive: true }).map((f) => relToRoot(fileURLToPath(new URL(`dist/src/${f}`, locate(entry).pkgDir))));
  }
  writeFileSync(tmp(inputs), JSON.stringify({ failed, files }));
  // Both carry the time it began: a list newer than its bundle is one whose bundle never landed.
  utimesSync(tmp(inputs), began, began);
  renameSync(tmp(inputs), inputs);
  if (failed) return rmSync(tmp(file), { force: true });
  utimesSync(tmp(file), began, began);
  renameSync(tmp(file), file);
}

/**
 * Makes the bundle in a detached child at the lowest CPU priority, so that the start that found
 * it stale is not slowed (much) and the next one uses it. Its output is dropped: a bundle that
 * cannot be made only means dist/ keeps being run.
 */
function bundleInBackground(entry) {
  if (bundleFailedBefore(entry)) return;
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--bundle-only', entry], { cwd: rootPath, detached: true, stdio: 'ignore' });
  child.once('error', () => {});
  try {
    setPriority(child.pid, 19);
  } catch {
    // Not allowed here: it runs at the normal priority.
  }
  child.unref();
}

if (process.argv[2] === '--bundle-only') {
  await makeBundle(process.argv[3]);
  process.exit(0);
}

if (process.argv[2] === '--build-only') {
  // One build before several processes start (the cluster, a bench), so that they do not race.
  const failures = [];
  for (const e of process.argv.slice(3)) {
    const f = await ensureBuilt(e);
    if (f !== null) failures.push(f);
  }
  for (const f of failures) console.error(`agentry: ${f}`);
  process.exit(failures.length > 0 ? 1 : 0);
}

const bundled = process.argv[2] === '--bundle';
if (bundled) process.argv.splice(2, 1);
const entry = process.argv[2];
const { dist } = locate(entry);
// The entry sees its own arguments where it would under `node dist/...`.
process.argv.splice(2, 1);
const failed = await ensureBuilt(entry);
if (failed === null) {
  // eslint-disable-next-line no-restricted-syntax -- the launcher is the entry that reads it
  const useBundle = bundled && usesBundle(process.env);
  const bundle = useBundle ? freshBundle(entry) : null;
  // Made once the entry says it is serving (the standalone's main.ts calls this after listen):
  // begun at once, it competed with a first start's initdb and web UI build, and its ~100 MB
  // added to that start's peak.
  if (useBundle && bundle === null) globalThis[Symbol.for('agentry.started')] = () => bundleInBackground(entry);
  await import((bundle ?? dist).href);
} else {
  console.error(`agentry: starting from the TypeScript sources under tsx (${failed}); \`npm run build\` makes starts compiled`);
  // What `--conditions=@agentry/source --import tsx` does on the command line.
  register('../services/cli/bin/source-condition.mjs', import.meta.url);
  const { register: registerTsx } = await import('tsx/esm/api');
  registerTsx();
  await import(new URL(entry, root).href);
}
