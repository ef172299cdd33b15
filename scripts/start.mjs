// Starts an Agentry entry point as compiled JavaScript, as the image runs it: `npm start`,
// `npm run start:*`, `npm run cluster` and the benches go through here.
//
//   node scripts/start.mjs <package dir>/src/<file>.ts [args...]
//   node scripts/start.mjs --build-only <entry>...   # build what is stale, start nothing
//
// When the dist/ of the entry's package, or of a workspace package it depends on, is missing or
// older than its src/ (a fresh clone, sources edited since the last build), those packages are
// built first with `tsc -b` (about 35 s from nothing on a 2-core machine, a few seconds after an
// edit). Compiled, a process skips transpiling every module at start and runs plain V8 code
// (docs/benchmarks.md measures the difference). Only when no build can be made (TypeScript absent
// from a production install, or a type error mid-edit) does it run the sources under tsx, and says
// why. Plain JavaScript so that the up-to-date check costs a bare `node` start and a stat per file.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const rootPath = fileURLToPath(root);

/** dist/ of the package was built after the last change to its src/. */
function built(pkg) {
  const src = new URL('src/', pkg);
  if (!existsSync(src)) return true;
  const info = new URL('dist/.tsbuildinfo', pkg);
  if (!existsSync(info)) return false;
  const at = statSync(info).mtimeMs;
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

/** Builds the package (tsc -b follows its project references); the reason it could not, or null. */
function build(pkgDir, why) {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    return 'TypeScript is not installed (a production install)';
  }
  console.error(`agentry: building ${rel(pkgDir)} first (${why}); it starts once the build is done`);
  const res = spawnSync(process.execPath, [tsc, '-b', fileURLToPath(pkgDir)], { cwd: rootPath, stdio: ['ignore', 'inherit', 'inherit'] });
  return res.status === 0 ? null : `\`tsc -b ${rel(pkgDir)}\` failed (exit ${res.status ?? res.signal})`;
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
function ensureBuilt(entry) {
  const { pkgDir, dist } = locate(entry);
  const stale = closure(pkgDir).filter((p) => !built(p));
  const why = !existsSync(dist) ? 'there is no build yet' : stale.length > 0 ? `the build is older than the sources of ${stale.map(rel).join(', ')}` : null;
  return why === null ? null : build(pkgDir, why);
}

if (process.argv[2] === '--build-only') {
  // One build before several processes start (the cluster, a bench), so that they do not race.
  const failures = process.argv.slice(3).map(ensureBuilt).filter((f) => f !== null);
  for (const f of failures) console.error(`agentry: ${f}`);
  process.exit(failures.length > 0 ? 1 : 0);
}

const entry = process.argv[2];
const { dist } = locate(entry);
// The entry sees its own arguments where it would under `node dist/...`.
process.argv.splice(2, 1);
const failed = ensureBuilt(entry);
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
