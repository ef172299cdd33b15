import fs from 'node:fs';
import path from 'node:path';

/**
 * The test tiers. `npm test` runs every file; `npm run test:fast` (vitest `--mode fast`) runs the
 * files that need nothing outside the test process: no Postgres or Redis server, no browser, no
 * container image, no spawned services. Which tier a file is in follows from its text, so that
 * the list never needs keeping: a file is full-tier when it lives under `e2e/`, or when it or a
 * test-side module it imports (transitively, relative imports inside a `test/` directory) names
 * one of the markers below. A suite that runs on PGlite and again on Postgres
 * (`describeAlsoOnPostgres`) stays fast: the fast tier runs its PGlite half only. A file that still
 * reaches for a server in the fast tier (a helper this rule does not know) fails loudly: the
 * helpers themselves refuse to run there (`assertNotFastTier`).
 */
export const FULL_TIER_MARKERS =
  /\b(describeWithPostgres|describeWithRedis|describeWithServers|spawnService|startLocalCluster|startTestCluster|chromium|playwright|browser-target|node:child_process)\b/;

/** The environment variable that tells helpers (in test workers) they run in the fast tier. */
export const TIER_ENV = 'AGENTRY_TEST_TIER';

export function isFastTier(): boolean {
  return process.env[TIER_ENV] === 'fast';
}

/** Thrown by a server or process helper used in the fast tier: the file belongs to the full tier. */
export function assertNotFastTier(what: string): void {
  if (!isFastTier()) return;
  throw new Error(
    `${what} needs servers or processes, which the fast tier (npm run test:fast) does not have: ` +
      `the tier rule in libs/testing/src/tiers.ts put this file in the fast tier by mistake; ` +
      `make the file (or a helper it imports) name one of FULL_TIER_MARKERS`,
  );
}

const IMPORT = /\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]|\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

function resolveLocal(from: string, spec: string): string | null {
  const base = path.resolve(path.dirname(from), spec);
  for (const candidate of [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, path.join(base, 'index.ts')]) {
    if (candidate.endsWith('.ts') && fs.existsSync(candidate)) return candidate;
  }
  return null;
}

/** Whether the file, or a relative module it imports, names a full-tier marker. */
export function needsFullTier(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  if (FULL_TIER_MARKERS.test(text)) return true;
  for (const m of text.matchAll(IMPORT)) {
    const target = resolveLocal(file, m[1] ?? m[2]!);
    // Sources under src/ are the code under test, not set-up: only test-side helpers count.
    if (target && target.split(path.sep).includes('test') && needsFullTier(target, seen)) return true;
  }
  return false;
}

function testFilesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => path.join(dir, f));
}

/**
 * What a file does to module state for itself alone: a module mock (hoisted above its imports) or a
 * stubbed global only takes hold in modules loaded after it, so such a file needs fresh modules.
 */
export const OWN_MODULES_MARKERS = /\bvi\.(mock|doMock|unmock|stubGlobal|stubEnv|resetModules)\b/;

/** Whether the file mocks modules or globals (`OWN_MODULES_MARKERS`), so that it must not share a module cache. */
export function needsOwnModules(file: string): boolean {
  return OWN_MODULES_MARKERS.test(fs.readFileSync(file, 'utf8'));
}

/** The fast tier's files, relative to `root`, sorted. */
export function fastTierFiles(root: string): string[] {
  const files: string[] = [];
  for (const top of ['libs', 'services']) {
    const topDir = path.join(root, top);
    for (const pkg of fs.readdirSync(topDir)) {
      for (const file of testFilesUnder(path.join(topDir, pkg, 'test'))) {
        if (!needsFullTier(file)) files.push(path.relative(root, file));
      }
    }
  }
  return files.sort();
}

/**
 * The files that share one module cache per worker (vitest `isolate: false`), relative to `root`,
 * sorted: the fast tier's files less those that mock modules or globals. In-process e2e files
 * stay isolated: sharing halved their import time but measured no shorter run (docs/conventions.md).
 */
export function sharedModuleFiles(root: string): string[] {
  return fastTierFiles(root).filter((f) => !needsOwnModules(path.join(root, f)));
}
