/**
 * What the bench scripts share: child processes of Agentry's entry points (under tsx as `npm
 * start` runs them, or compiled as the image runs them) with their output in log files, a cleanup
 * stack run on every exit path, /proc readings, percentiles, a throwaway migrated database, a
 * scrape of a service's /metrics, the machine line and the marked section of docs/benchmarks.md.
 * Not for tests (those have libs/testing, whose database helper needs vitest's injected server
 * URLs).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { createMigratedDatabase } from '@agentry/testing';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The Postgres server (its `postgres` database; benches make their own) and Redis the benches
 * use: BENCH_POSTGRES_URL / BENCH_REDIS_URL, else the loopback defaults. Loopback only: a bench
 * creates and drops databases and deletes keys by prefix.
 */
export const BENCH_POSTGRES_URL = process.env.BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
export const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
for (const u of [BENCH_POSTGRES_URL, BENCH_REDIS_URL]) {
  if (new URL(u).hostname !== '127.0.0.1') {
    console.error(`the benches only talk to 127.0.0.1 (got ${u})`);
    process.exit(2);
  }
}
export const BENCH_DOC = path.join(ROOT, 'docs/benchmarks.md');

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
    }),
  ]);
}

/** Nearest-rank percentile of an ascending array (NaN when empty). */
export function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const sortNum = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);

// ---------------------------------------------------------------------------------------------
// Cleanup on every exit path

const cleanups: { name: string; fn: () => Promise<void> }[] = [];
const children = new Set<ChildProcess>();
let cleaningUp: Promise<void> | undefined;
let exiting = false;

/** Registers a cleanup; they run last-in first-out, once, on success, error, signal or watchdog. */
export function onCleanup(name: string, fn: () => Promise<void>): void {
  cleanups.push({ name, fn });
}

export function runCleanups(): Promise<void> {
  cleaningUp ??= (async () => {
    while (cleanups.length > 0) {
      const { name, fn } = cleanups.pop()!;
      try {
        await withTimeout(fn(), 30_000, `cleanup ${name}`);
      } catch (err) {
        console.error(`cleanup ${name} failed: ${errorText(err)}`);
      }
    }
  })();
  return cleaningUp;
}

function bail(code: number, why: string): void {
  if (exiting) return;
  exiting = true;
  console.error(`\n${why}: cleaning up`);
  void runCleanups().finally(() => process.exit(code));
}

/**
 * Runs a bench's main with the cleanups on every exit path, Ctrl-C and a watchdog included; no
 * child process outlives the bench. Exits with main's code (1 when it threw).
 */
export function runBench(main: () => Promise<number | void>, watchdogMs: number): void {
  process.once('SIGINT', () => bail(130, 'interrupted'));
  process.once('SIGTERM', () => bail(143, 'terminated'));
  const watchdog = setTimeout(() => bail(1, `watchdog: the bench ran longer than ${Math.round(watchdogMs / 60_000)} minutes`), watchdogMs);
  process.on('exit', () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  void (async () => {
    let code = 0;
    try {
      code = (await main()) ?? 0;
    } catch (err) {
      code = 1;
      console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    } finally {
      clearTimeout(watchdog);
    }
    if (exiting) return;
    exiting = true;
    await runCleanups();
    process.exit(code);
  })();
}

// ---------------------------------------------------------------------------------------------
// Child processes

export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** The file its stdout and stderr go to. */
  log: string;
  alive(): boolean;
  /** The last lines of its log. */
  tail(lines?: number): string;
  waitForLog(pattern: RegExp, timeoutMs: number): Promise<void>;
  /** SIGTERM (or the signal), then SIGKILL after 15 s. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Where `<name>.log` goes (default: a temporary folder removed at the end). */
  logDir?: string;
  /**
   * `node` (default for `src/*.ts` entries): the compiled `dist/src/*.js` beside it, as the image,
   * `npm start` and `npm run start:*` run it (built first through scripts/start.mjs when stale).
   * `tsx`: the TypeScript source (development; the bench's own helpers such as the fake model).
   */
  runtime?: 'tsx' | 'node';
  /** Extra node flags (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /**
   * Another checkout to run the entry from (bench/ab.ts compares two commits); its dist/ must be
   * built already. Default: this repository.
   */
  root?: string;
}

let defaultLogDir: string | undefined;
const builtEntries = new Set<string>();

/** Builds a `src/*.ts` entry's packages when stale (once per entry and bench run), as `npm run start:*` would. */
function ensureBuilt(entry: string): void {
  if (!/\/src\/.+\.ts$/.test(entry) || builtEntries.has(entry)) return;
  execFileSync(process.execPath, [path.join(ROOT, 'scripts/start.mjs'), '--build-only', entry], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  builtEntries.add(entry);
}

/**
 * The compiled file of a source entry: `services/x/src/main.ts` -> `services/x/dist/src/main.js`;
 * a JavaScript file (a dependency's own build) is itself.
 */
export function compiledEntry(entry: string): string {
  if (/\.m?js$/.test(entry)) return entry;
  const m = /^(.*)\/src\/(.+)\.ts$/.exec(entry);
  if (!m) throw new Error(`${entry} is not a src/*.ts entry`);
  return `${m[1]}/dist/src/${m[2]}.js`;
}

/**
 * Starts a TypeScript entry of the repository (path relative to the root) with a controlled
 * environment (PATH and HOME plus `env`); its output goes to a log file, not to this process's
 * memory, so a long or chatty run costs the bench nothing. BENCH_CPU_PROF=<dir> makes every child
 * write V8 CPU profiles into <dir>/<name>/ when it exits.
 */
export function spawnEntry(name: string, entry: string, opts: SpawnOptions = {}): Child {
  if (!opts.logDir && !defaultLogDir) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-bench-logs-'));
    defaultLogDir = dir;
    onCleanup('bench logs', async () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  const log = path.join(opts.logDir ?? defaultLogDir!, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  // A name started again (a bench's next round) appends to the same file: this child's output starts here.
  const from = fs.fstatSync(fd).size;
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir(), ...opts.env };
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF, name)}`] : [];
  const compiled = (opts.runtime ?? (/\/src\/.+\.ts$/.test(entry) ? 'node' : 'tsx')) === 'node';
  const root = opts.root ?? ROOT;
  if (compiled && root === ROOT) ensureBuilt(entry);
  const file = path.resolve(root, compiled ? compiledEntry(entry) : entry);
  if (compiled && !fs.existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first`);
  const args = compiled ? [...prof, ...(opts.nodeArgs ?? []), file] : [...prof, ...(opts.nodeArgs ?? []), '--conditions=@agentry/source', '--import', import.meta.resolve('tsx'), file];
  const proc = spawn(process.execPath, [...args, ...(opts.args ?? [])], { cwd: opts.cwd ?? root, env, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  if (proc.pid === undefined) throw new Error(`${name}: could not start ${entry}`);
  children.add(proc);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => children.delete(proc));
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  const ownOutput = () => fs.readFileSync(log).subarray(from).toString('utf8');
  const tail = (lines = 15) => ownOutput().split('\n').slice(-lines).join('\n');
  return {
    name,
    proc,
    pid: proc.pid,
    log,
    alive,
    tail,
    async waitForLog(pattern, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if (pattern.test(ownOutput())) return;
        if (!alive()) throw new Error(`${name} exited (code ${proc.exitCode}) before ${pattern}:\n${tail()}`);
        await sleep(50);
      }
      throw new Error(`${name}: no ${pattern} within ${timeoutMs} ms:\n${tail()}`);
    },
    async stop(signal = 'SIGTERM') {
      if (!alive()) return;
      proc.kill(signal);
      const late = await Promise.race([exited.then(() => false), sleep(15_000).then(() => true)]);
      if (late && alive()) {
        proc.kill('SIGKILL');
        await Promise.race([exited, sleep(5_000)]);
      }
    },
  };
}

/** Polls `url` until it answers 2xx; fails early when `child` exits. */
export async function waitForHttp(url: string, timeoutMs: number, child?: Child, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child && !child.alive()) throw new Error(`${child.name} exited before ${url} answered:\n${child.tail()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = errorText(err);
    }
    await sleep(intervalMs);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
}

// ---------------------------------------------------------------------------------------------
// /proc readings

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

export const CLK_TCK = 100;

/** User and system CPU time of a process in clock ticks; [0, 0] when it is gone. */
export function cpuTicksSplit(pid: number): [user: number, system: number] {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat; fields[0] here is field 3 (state).
    return [Number(fields[11]), Number(fields[12])];
  } catch {
    return [0, 0];
  }
}

/** CPU time (user + system) of a process in clock ticks; 0 when it is gone. */
export function cpuTicks(pid: number): number {
  const [user, system] = cpuTicksSplit(pid);
  return user + system;
}

/** The whole machine's busy and total clock ticks so far (first line of /proc/stat). */
export function boxTicks(): { busy: number; total: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * Waits until the whole machine is quieter than `busyPct` % over half a second (others may work
 * on it too), at most `maxWaitMs`; resolves with how busy it was in the last half second and how
 * long it waited.
 */
export async function waitForQuietBox(busyPct: number, maxWaitMs: number): Promise<{ busy: number; waitedMs: number }> {
  const t0 = performance.now();
  for (;;) {
    const a = boxTicks();
    await sleep(500);
    const b = boxTicks();
    const busy = (100 * (b.busy - a.busy)) / Math.max(1, b.total - a.total);
    const waitedMs = performance.now() - t0;
    if (busy < busyPct || waitedMs >= maxWaitMs) return { busy, waitedMs };
  }
}

/** Pids of the local Postgres and Redis servers (for their CPU share; they may serve others too). */
export function backendPids(): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (comm === 'redis-server' || comm.startsWith('postgres')) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/**
 * Postgres processes by their titles (`postgres: 15/main: <user> <database> <host> <state>` for a
 * backend, `postgres: 15/main: walwriter` and the like for the server's own): the backends of
 * `database`, and the server's shared processes (postmaster included; not other databases').
 */
export function postgresPids(database: string): { backends: number[]; shared: number[] } {
  const backends: number[] = [];
  const shared: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!fs.readFileSync(`/proc/${entry}/comm`, 'utf8').startsWith('postgres')) continue;
      const title = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      const backend = /^postgres: (?:[^:]+: )?\S+ (\S+) \S+\(\d+\)/.exec(title);
      if (backend) {
        if (backend[1] === database) backends.push(Number(entry));
      } else shared.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return { backends, shared };
}

/** CPU use of some processes over an interval, in % of one core. */
export function cpuMeter(pids: readonly number[]): { stop(): number } {
  const t0 = performance.now();
  const start = pids.map(cpuTicks);
  return {
    stop() {
      const seconds = (performance.now() - t0) / 1000;
      const ticks = pids.reduce((sum, pid, i) => sum + Math.max(0, cpuTicks(pid) - start[i]!), 0);
      return (100 * ticks) / CLK_TCK / seconds;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Backends

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
  const db = await createMigratedDatabase(serverUrl, name, { poolMax: 1 });
  // The services under test open their own pools; this one's connection would only be counted with theirs.
  await db.handle.close();
  return { url: db.url, name, drop: db.drop };
}

// ---------------------------------------------------------------------------------------------
// What a run costs the backends: Postgres and Redis counters

/**
 * A Redis server of the bench's own on a free loopback port, without persistence: its `INFO
 * commandstats` count only the commands of the processes under test (the shared server on 6379
 * also serves other work). Stopped by the cleanups.
 */
export async function startPrivateRedis(port: number): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--logfile', ''], { stdio: 'ignore' });
  if (proc.pid === undefined) throw new Error('could not start redis-server (is it installed?)');
  children.add(proc);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000)]);
  };
  onCleanup(`redis-server ${port}`, stop);
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await redisCommandCounts(url);
      return { url, pid: proc.pid, stop };
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not answer: ${errorText(err)}`);
      await sleep(100);
    }
  }
}

/** Calls per command since the server started (`INFO commandstats`), commands inside scripts included. */
export async function redisCommandCounts(url: string): Promise<Map<string, number>> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => {});
  try {
    await r.connect();
    const text = await r.info('commandstats');
    const counts = new Map<string, number>();
    for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(m[1]!, Number(m[2]));
    return counts;
  } finally {
    r.disconnect();
  }
}

export interface PgCounters {
  /** Transactions committed or rolled back: one per statement outside BEGIN..COMMIT. */
  xacts: number;
  /** Rows inserted, updated and deleted. */
  written: number;
  /** Rows read (returned by sequential scans plus fetched by index scans). */
  read: number;
}

/**
 * The cumulative counters of one database (`pg_stat_database`). Backends report theirs when they
 * go idle, at most once a second, and an idle one within 10 s (Postgres 15): read them only after
 * the load has been idle that long. This query counts one transaction of its own.
 */
export async function pgCounters(serverUrl: string, database: string): Promise<PgCounters> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ xacts: string; written: string; read: string }>(
      `select xact_commit + xact_rollback as xacts, tup_inserted + tup_updated + tup_deleted as written, tup_returned + tup_fetched as read
         from pg_stat_database where datname = $1`,
      [database],
    );
    const row = rows[0];
    return { xacts: Number(row?.xacts ?? 0), written: Number(row?.written ?? 0), read: Number(row?.read ?? 0) };
  } finally {
    await c.end();
  }
}

/**
 * WAL flushes (`fsync`s of the WAL: `pg_stat_wal.wal_sync`) of the whole server: Postgres 15
 * counts them per server, not per database, so whatever else the server runs counts too (the
 * idle window's rate is taken out, as for the other counters). Reported like the database's.
 */
export async function walSyncs(serverUrl: string): Promise<number> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ wal_sync: string }>('select wal_sync from pg_stat_wal');
    return Number(rows[0]?.wal_sync ?? 0);
  } finally {
    await c.end();
  }
}

/** Postgres 15 reports an idle backend's counters within 10 s. */
const PG_REPORT_MS = 11_000;

export interface RunCost {
  /** Postgres transactions per run (a statement outside BEGIN..COMMIT is one). */
  xacts: number;
  /** Postgres rows inserted, updated or deleted per run. */
  written: number;
  /** Redis commands per run (commands inside scripts counted too). */
  redis: number;
  /** WAL flushes per run (server-wide: see walSyncs). */
  walSyncs: number;
  /** The most frequent Redis commands per run. */
  top: string;
}

/**
 * What a run costs the backends: `runs` requests sent by `send` (resolving with how many
 * succeeded), between idle windows long enough for Postgres to report its counters, less the
 * background the idle processes cause meanwhile (BullMQ's timers, health checks), measured over
 * the first window. `database` must be the processes' own; the Redis server theirs alone
 * (startPrivateRedis), since INFO commandstats counts the whole server.
 */
export async function measureRunCost(opts: { send: (runs: number) => Promise<number>; runs: number; postgresUrl: string; database: string; redisUrl: string }): Promise<RunCost> {
  await sleep(PG_REPORT_MS);
  const t0 = performance.now();
  const r0 = await redisCommandCounts(opts.redisUrl);
  const p0 = await pgCounters(opts.postgresUrl, opts.database);
  const w0 = await walSyncs(opts.postgresUrl);
  await sleep(PG_REPORT_MS);
  const p1 = await pgCounters(opts.postgresUrl, opts.database);
  const w1 = await walSyncs(opts.postgresUrl);
  const r1 = await redisCommandCounts(opts.redisUrl);
  const idleMs = performance.now() - t0;
  const ok = await opts.send(opts.runs);
  await sleep(PG_REPORT_MS);
  const p2 = await pgCounters(opts.postgresUrl, opts.database);
  const w2 = await walSyncs(opts.postgresUrl);
  const r2 = await redisCommandCounts(opts.redisUrl);
  const busyMs = performance.now() - t0 - idleMs;
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  // Each counter query is one transaction, each INFO one command: take them out too.
  const idleRedis = (sum(r1) - sum(r0) - 1) / idleMs;
  const idleXacts = (p1.xacts - p0.xacts - 1) / idleMs;
  const idleWal = (w1 - w0) / idleMs;
  const per = (x: number) => x / Math.max(1, ok);
  const delta = [...r2].map(([k, v]) => [k, v - (r1.get(k) ?? 0) - (k === 'info' ? 1 : 0)] as const).filter(([, v]) => v > 0);
  return {
    xacts: per(p2.xacts - p1.xacts - 1 - idleXacts * busyMs),
    written: per(p2.written - p1.written),
    redis: per(sum(r2) - sum(r1) - 1 - idleRedis * busyMs),
    walSyncs: per(Math.max(0, w2 - w1 - idleWal * busyMs)),
    top: delta
      .sort((a, b) => b[1] - a[1])
      .slice(0, 14)
      .map(([k, v]) => `${k} ${per(v).toFixed(1)}`)
      .join(', '),
  };
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

/** Server versions for the machine line. */
export async function backendVersions(postgresUrl: string, redisUrl: string): Promise<{ pg: string; redis: string }> {
  let pgV = 'unknown';
  let redisV = 'unknown';
  try {
    const c = new pg.Client({ connectionString: postgresUrl });
    await c.connect();
    try {
      pgV = String((await c.query<{ server_version: string }>('show server_version')).rows[0]?.server_version ?? 'unknown');
    } finally {
      await c.end();
    }
  } catch (err) {
    pgV = `unavailable (${errorText(err)})`;
  }
  const r = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => {});
  try {
    await r.connect();
    redisV = /redis_version:(\S+)/.exec(await r.info('server'))?.[1] ?? 'unknown';
  } catch (err) {
    redisV = `unavailable (${errorText(err)})`;
  } finally {
    r.disconnect();
  }
  return { pg: pgV, redis: redisV };
}

// ---------------------------------------------------------------------------------------------
// Report

/**
 * The short commit the run started on, with " plus uncommitted changes" when the tree was dirty.
 * Read once, when the script starts: a long run (the soak) must not report a commit made while
 * it ran, whose code it never loaded.
 */
export function gitCommit(): string {
  return COMMIT_AT_START;
}

function readCommit(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT }).toString().trim() !== '';
    return dirty ? `${commit} plus uncommitted changes` : commit;
  } catch {
    return 'unknown';
  }
}

const COMMIT_AT_START = readCommit();

/** One line on where a run ran: cores, CPU model, memory, kernel, Node, commit. */
export function machineLine(): string {
  const cpuModel = /model name\s*:\s*(.+)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown CPU';
  return `${os.availableParallelism()} cores (${cpuModel}), ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB, Linux ${os.release()}, Node ${process.version}; commit ${gitCommit()}`;
}

/** The command a user types to repeat this run. */
export function commandLine(script: string): string {
  const args = process.argv.slice(2);
  return `npm run ${script}${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
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
/**
 * Theil-Sen slope: the median of the slopes between every pair of points. Unlike least squares it
 * is not dragged by a few outliers (an RSS sample taken just after the allocator returned pages,
 * a GC that ran late), which is what a minute-by-minute memory series is made of.
 */
export function theilSenSlope(points: ReadonlyArray<readonly [number, number]>): number {
  const p = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const slopes: number[] = [];
  for (let i = 0; i < p.length; i++) {
    for (let j = i + 1; j < p.length; j++) {
      const dx = p[j]![0] - p[i]![0];
      if (dx !== 0) slopes.push((p[j]![1] - p[i]![1]) / dx);
    }
  }
  if (slopes.length === 0) return NaN;
  slopes.sort((a, b) => a - b);
  const mid = slopes.length >> 1;
  return slopes.length % 2 === 1 ? slopes[mid]! : (slopes[mid - 1]! + slopes[mid]!) / 2;
}

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

/**
 * A commit as a tree of its own in the temp folder (`agentry-<folder>-<sha>`), its node_modules
 * linked to ours but for the workspace packages (which must be the commit's own), with
 * `projects` built by tsc; kept for the next run while `built` (a file in it) exists.
 */
export function commitTree(commit: string, opts: { folder: string; projects: string[]; built: string; label: string }): string {
  const sha = execFileSync('git', ['rev-parse', '--short', commit], { cwd: ROOT }).toString().trim();
  const dir = path.join(os.tmpdir(), `agentry-${opts.folder}-${sha}`);
  if (fs.existsSync(path.join(dir, opts.built))) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  execFileSync('sh', ['-c', `git archive ${sha} | tar -x -C ${dir}`], { cwd: ROOT });
  const nm = path.join(dir, 'node_modules');
  fs.mkdirSync(path.join(nm, '@agentry'), { recursive: true });
  for (const e of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    if (e !== '@agentry') fs.symlinkSync(path.join(ROOT, 'node_modules', e), path.join(nm, e));
  }
  for (const e of fs.readdirSync(path.join(ROOT, 'node_modules/@agentry'))) {
    fs.symlinkSync(fs.readlinkSync(path.join(ROOT, 'node_modules/@agentry', e)), path.join(nm, '@agentry', e));
  }
  console.log(`${opts.label}: building ${sha} (${opts.projects.join(', ')}) in ${dir}`);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', ...opts.projects], { cwd: dir, stdio: 'inherit' });
  return dir;
}
