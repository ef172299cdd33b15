// Starts an Agentry entry point as compiled JavaScript, as the image runs it: `npm start`,
// `npm run start:*`, `npm run cluster` and the benches go through here.
//
//   node scripts/start.mjs <package dir>/src/<file>.ts [args...]
//   node scripts/start.mjs --build-only <entry>...   # build what is stale, start nothing
//
// When the dist/ of the entry's package, or of a workspace package it depends on, is missing or
// older than its src/ (a fresh clone, sources edited since the last build), those packages are
// transpiled first with esbuild (about a second; `npm run build`, tsc -b, checks types and makes
// the same files). Compiled, a process skips transpiling every module at start and runs plain V8
// code (docs/benchmarks.md measures the difference). Only when nothing can be transpiled (a
// syntax error mid-edit) does it run the sources under tsx, and says why. Plain JavaScript so
// that the up-to-date check costs a bare `node` start and a stat per file.
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = new URL('../', import.meta.url);
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
  let esbuild;
  try {
    const fromTsx = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'));
    esbuild = await import(pathToFileURL(fromTsx.resolve('esbuild')).href);
  } catch {
    return 'esbuild (which tsx brings) is not installed';
  }
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
    console.error('usage: node scripts/start.mjs [--build-only] <package>/src/<file>.ts [args...]');
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

const entry = process.argv[2];
const { dist } = locate(entry);
// The entry sees its own arguments where it would under `node dist/...`.
process.argv.splice(2, 1);
const failed = await ensureBuilt(entry);
if (failed === null) {
  await import(dist.href);
} else {
  console.error(`agentry: starting from the TypeScript sources under tsx (${failed}); \`npm run build\` makes starts compiled`);
  // What `--conditions=@agentry/source --import tsx` does on the command line.
  register('../services/cli/bin/source-condition.mjs', import.meta.url);
  const { register: registerTsx } = await import('tsx/esm/api');
  registerTsx();
  await import(new URL(entry, root).href);
}
