/**
 * Small pieces the bench scripts share: a throwaway migrated database, /proc readings, a scrape
 * of a service's /metrics, and the marked section of docs/benchmarks.md. Not for tests (those have
 * libs/testing, whose database helper needs vitest's injected server URLs).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrateToLatest, openPostgres } from '@agentry/db';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH_DOC = path.join(ROOT, 'docs/benchmarks.md');

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resident set size of a process in MB (VmRSS), NaN when it is gone. */
export function rssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export interface BenchDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/**
 * A throwaway database `<prefix>_<random>` on the server `serverUrl` names, migrated to the
 * latest schema. `drop()` is idempotent and forces other sessions off.
 */
export async function createBenchDatabase(serverUrl: string, prefix = 'agentry_bench'): Promise<BenchDatabase> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropping: Promise<void> | undefined;
  const drop = () =>
    (dropping ??= (async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      } finally {
        await c.end();
      }
    })());
  try {
    const handle = openPostgres({ url: url.toString(), poolMax: 1 });
    try {
      await migrateToLatest(handle.db);
    } finally {
      await handle.close();
    }
  } catch (err) {
    await drop();
    throw err;
  }
  return { url: url.toString(), name, drop };
}

/**
 * One sample of a Prometheus text exposition: the first series of each metric name (the
 * services' default labels are the same on every series of one process), plus the sum over all
 * series of a name in `sums`.
 */
export interface MetricsSample {
  first: Map<string, number>;
  sums: Map<string, number>;
}

export async function scrapeMetrics(url: string, timeoutMs = 10_000): Promise<MetricsSample> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return parseMetrics(await res.text());
}

export function parseMetrics(text: string): MetricsSample {
  const first = new Map<string, number>();
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})? (\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[2]);
    if (!Number.isFinite(value)) continue;
    if (!first.has(m[1]!)) first.set(m[1]!, value);
    sums.set(m[1]!, (sums.get(m[1]!) ?? 0) + value);
  }
  return { first, sums };
}

export function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}

/**
 * Replaces the text between `<!-- bench:<id>:start -->` and `<!-- bench:<id>:end -->` in
 * docs/benchmarks.md (markers included in `body`), or appends it when the markers are missing.
 * Whatever follows the end marker (the hand-written reading) is kept.
 */
export function writeDocSection(id: string, body: string): void {
  const start = `<!-- bench:${id}:start -->`;
  const end = `<!-- bench:${id}:end -->`;
  if (!body.startsWith(start) || !body.endsWith(end)) throw new Error(`the section body must be wrapped in its markers (${id})`);
  const doc = fs.existsSync(BENCH_DOC) ? fs.readFileSync(BENCH_DOC, 'utf8') : '# Benchmarks\n';
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  const next = i >= 0 && j > i ? doc.slice(0, i) + body + doc.slice(j + end.length) : `${doc.trimEnd()}\n\n${body}\n`;
  fs.writeFileSync(BENCH_DOC, next);
}

/** Least-squares line through (x, y); NaN points are left out. */
export function linearFit(points: ReadonlyArray<readonly [number, number]>): { slope: number; intercept: number; n: number } {
  const p = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const n = p.length;
  if (n < 2) return { slope: NaN, intercept: NaN, n };
  const mx = p.reduce((s, [x]) => s + x, 0) / n;
  const my = p.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of p) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  const slope = sxx === 0 ? NaN : sxy / sxx;
  return { slope, intercept: my - slope * mx, n };
}
