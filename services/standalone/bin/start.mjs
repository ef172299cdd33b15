// `npm start`. Runs the compiled standalone (dist/, what `npm run build`, `npm test` or `tsc -b`
// wrote) when every workspace package's dist/ is at least as new as its src/, else the
// TypeScript sources under tsx with the `@agentry/source` condition (a fresh clone, or sources
// edited since the last build). Both run the same code; the compiled start skips transpiling
// every module at start-up, about a second on a 2-core machine (docs/benchmarks.md, cold start).
// Plain JavaScript so that the check costs only a bare `node` start and a stat per source file.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { register } from 'node:module';

const root = new URL('../../../', import.meta.url);

/** dist/ of the package was built after the last change to its src/. */
function built(pkg) {
  const src = new URL('src/', pkg);
  if (!existsSync(src)) return true;
  const info = new URL('dist/.tsbuildinfo', pkg);
  if (!existsSync(info)) return false;
  const at = statSync(info).mtimeMs;
  return readdirSync(src, { recursive: true }).every((f) => statSync(new URL(String(f), src)).mtimeMs <= at);
}

/** The standalone and every workspace package it depends on, directly or not. */
function packages() {
  const dirs = new Map();
  for (const dir of ['libs/', 'services/']) {
    for (const d of readdirSync(new URL(dir, root), { withFileTypes: true })) {
      const manifest = new URL(`${dir}${d.name}/package.json`, root);
      if (d.isDirectory() && existsSync(manifest)) dirs.set(JSON.parse(readFileSync(manifest, 'utf8')).name, new URL(`${dir}${d.name}/`, root));
    }
  }
  const seen = new Set();
  const visit = (name) => {
    if (seen.has(name) || !dirs.has(name)) return;
    seen.add(name);
    const { dependencies = {} } = JSON.parse(readFileSync(new URL('package.json', dirs.get(name)), 'utf8'));
    for (const dep of Object.keys(dependencies)) visit(dep);
  };
  visit('@agentry/standalone');
  return [...seen].map((name) => dirs.get(name));
}

const dist = new URL('services/standalone/dist/src/main.js', root);
const stale = existsSync(dist) ? packages().filter((p) => !built(p)) : null;
if (stale?.length === 0) {
  await import(dist.href);
} else {
  const why = stale === null ? 'there is no build yet' : `the build is older than the sources of ${stale.map((p) => p.pathname.slice(root.pathname.length, -1)).join(', ')}`;
  console.error(`agentry: starting from the TypeScript sources (${why}); \`npm run build\` makes the next start faster`);
  // What `--conditions=@agentry/source --import tsx` does on the command line (the CLI's
  // launcher has the same need and owns the hook).
  register('../../cli/bin/source-condition.mjs', import.meta.url);
  const { register: registerTsx } = await import('tsx/esm/api');
  registerTsx();
  await import(new URL('services/standalone/src/main.ts', root).href);
}
