/**
 * The first benchmark (issue 5): added time to first token and tokens/s of the full chat path
 * (client -> gateway -> queue -> agent-worker -> provider -> pub/sub -> gateway -> SSE) versus
 * the same load sent straight to the fake model, at 1, 50 and 200 concurrent streams.
 *
 *   npm run bench:chat                         # every target, writes docs/benchmarks.md
 *   npm run bench:chat -- --targets=cluster    # a subset (embedded, cluster, embedded-c200, cluster-c200)
 *   npm run bench:chat -- --quick --no-write   # fewer requests, print only
 *
 * Three roles, three kinds of process, so that none shares an event loop with another: this
 * process is the load generator (node:http, keep-alive, SSE parsed by hand, timings from
 * performance.now()); the fake model runs as libs/testing/src/fake-model-cli.ts (one process
 * with no delay between deltas, one with 20 ms); Agentry runs as its real entry points
 * (embedded: services/standalone/src/main.ts on PGlite; cluster: gateway + one agent-worker on
 * the local Postgres and Redis, in a throwaway database `agentry_bench_<random>`). The
 * `-c200` targets differ only in `worker.concurrency: 200` in the configuration file (the
 * default, 20 runs at once per worker, is what the other targets measure).
 *
 * Everything talks to 127.0.0.1 only. Every loop is bounded (request timeout, level deadline,
 * a watchdog on the whole run); child processes, the database, the Redis keys and the temp
 * directory are removed on every exit path. Not part of `npm test`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { migrateToLatest, openPostgres } from '@agentry/db';

// ---------------------------------------------------------------------------------------------
// Settings

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOC = path.join(ROOT, 'docs/benchmarks.md');
const MARK_START = '<!-- bench:chat-overhead:start -->';
const MARK_END = '<!-- bench:chat-overhead:end -->';

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
for (const a of argv) {
  if (!/^--(quick|no-write|targets=.+)$/.test(a)) {
    console.error(`unknown argument ${a}; use --targets=embedded,cluster,embedded-c200,cluster-c200 --quick --no-write`);
    process.exit(2);
  }
}
const QUICK = flag('quick');
const WRITE = !flag('no-write');

const POSTGRES_URL = process.env.BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
for (const u of [POSTGRES_URL, REDIS_URL]) {
  if (new URL(u).hostname !== '127.0.0.1') {
    console.error(`the bench only talks to 127.0.0.1 (got ${u})`);
    process.exit(2);
  }
}

/** Deltas per reply; the fake sends `tok0 ` .. `tok49 `. */
const TOKENS = 50;
const EXPECTED_TEXT = Array.from({ length: TOKENS }, (_, i) => `tok${i} `).join('');
const SYSTEM_PROMPT = 'You are the benchmark agent.';
const USER_MESSAGE = 'Say fifty tokens.';
const ACCOUNT_KEY = `sk-bench-${randomBytes(16).toString('hex')}`;
const PROVIDER_KEY = `sk-bench-provider-${randomBytes(8).toString('hex')}`;
const SHIPPED_CONCURRENCY = 100;
const RAISED_CONCURRENCY = 200;

const REQUEST_TIMEOUT_MS = 60_000;
const LEVEL_DEADLINE_MS = 60_000;
const START_TIMEOUT_MS = 90_000;
const WATCHDOG_MS = 15 * 60_000;
const CLK_TCK = 100;
/** Before each level the bench waits (bounded) for the shared box to be this quiet, in % busy. */
const QUIET_BUSY_PCT = 15;
const QUIET_WAIT_PER_LEVEL_MS = 15_000;
const QUIET_WAIT_TOTAL_MS = 90_000;

interface LevelPlan {
  n: number;
  /** Requests each virtual user sends first, not recorded (JIT, pools, sockets). */
  warmup: number;
  /** Recorded requests per virtual user. */
  rounds: number;
}

interface Scenario {
  id: string;
  title: string;
  chunkDelayMs: number;
  provider: string;
  agentId: string;
  levels: LevelPlan[];
}

const q = (full: number, quick: number) => (QUICK ? quick : full);
const SCENARIOS: Scenario[] = [
  {
    id: 'burst',
    title: `${TOKENS} deltas, no delay between them (the relay at full speed)`,
    chunkDelayMs: 0,
    provider: 'fake',
    agentId: 'bench-burst',
    levels: [
      { n: 1, warmup: 10, rounds: q(100, 30) },
      { n: 50, warmup: 1, rounds: q(6, 2) },
      { n: 200, warmup: 1, rounds: q(3, 1) },
    ],
  },
  {
    id: 'paced',
    title: `${TOKENS} deltas, 20 ms apart (a realistic 50 tokens/s model)`,
    chunkDelayMs: 20,
    provider: 'fake20',
    agentId: 'bench-paced',
    levels: [
      // Run right after the burst levels, whose sockets and JIT these reuse; each of these
      // requests lasts a second, so a warm-up round at N >= 50 would double the time for little.
      { n: 1, warmup: 1, rounds: q(5, 2) },
      { n: 50, warmup: 0, rounds: q(2, 1) },
      { n: 200, warmup: 0, rounds: 1 },
    ],
  },
];

interface TargetSpec {
  id: string;
  mode: 'embedded' | 'cluster';
  concurrency: number;
  describe: string;
}

const ALL_TARGETS: TargetSpec[] = [
  { id: 'embedded', mode: 'embedded', concurrency: SHIPPED_CONCURRENCY, describe: '`services/standalone/src/main.ts`: one process, PGlite, in-process bus' },
  {
    id: 'cluster',
    mode: 'cluster',
    concurrency: SHIPPED_CONCURRENCY,
    describe: '`services/gateway/src/main.ts` + one `services/agent-worker/src/main.ts`, Postgres and Redis on 127.0.0.1',
  },
  { id: 'embedded-c200', mode: 'embedded', concurrency: RAISED_CONCURRENCY, describe: 'as `embedded`' },
  { id: 'cluster-c200', mode: 'cluster', concurrency: RAISED_CONCURRENCY, describe: 'as `cluster`' },
];

const wanted = (option('targets') ?? ALL_TARGETS.map((t) => t.id).join(',')).split(',');
const unknownTarget = wanted.find((id) => !ALL_TARGETS.some((t) => t.id === id));
if (unknownTarget) {
  console.error(`unknown target ${unknownTarget}; known: ${ALL_TARGETS.map((t) => t.id).join(', ')}`);
  process.exit(2);
}
const TARGETS = ALL_TARGETS.filter((t) => wanted.includes(t.id));

// ---------------------------------------------------------------------------------------------
// Cleanup: a stack run on every exit path

const cleanups: { name: string; fn: () => Promise<void> }[] = [];
const children = new Set<ChildProcess>();
let cleaningUp: Promise<void> | undefined;

function runCleanups(): Promise<void> {
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

let exiting = false;
function bail(code: number, why: string): void {
  if (exiting) return;
  exiting = true;
  console.error(`\n${why}: cleaning up`);
  void runCleanups().finally(() => process.exit(code));
}
process.once('SIGINT', () => bail(130, 'interrupted'));
process.once('SIGTERM', () => bail(143, 'terminated'));
const watchdog = setTimeout(() => bail(1, `watchdog: the bench ran longer than ${WATCHDOG_MS / 60_000} minutes`), WATCHDOG_MS);
// Last resort if the process goes down some other way: no child outlives the bench.
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

// ---------------------------------------------------------------------------------------------
// Small helpers

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
    }),
  ]);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Nearest-rank percentile of an ascending array. */
function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);

// ---------------------------------------------------------------------------------------------
// Child processes

interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  log: string;
  waitForLog(pattern: RegExp, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

const tsxImport = import.meta.resolve('tsx');

/** Starts a TypeScript entry the way `npm run start:*` does (tsx, source condition); output to a log file. */
function spawnEntry(name: string, entry: string, opts: { args?: string[]; env: Record<string, string>; cwd: string; logDir: string }): Child {
  const log = path.join(opts.logDir, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir(), ...opts.env };
  // BENCH_CPU_PROF=<dir>: every Agentry and fake process writes V8 CPU profiles (one per thread)
  // into <dir>/<name>/ when it exits.
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF, name)}`] : [];
  const proc = spawn(process.execPath, [...prof, '--conditions=@agentry/source', '--import', tsxImport, path.resolve(ROOT, entry), ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env,
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  if (proc.pid === undefined) throw new Error(`${name}: could not start ${entry}`);
  children.add(proc);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => children.delete(proc));
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  const tail = () => fs.readFileSync(log, 'utf8').split('\n').slice(-15).join('\n');
  return {
    name,
    proc,
    pid: proc.pid,
    log,
    async waitForLog(pattern, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if (pattern.test(fs.readFileSync(log, 'utf8'))) return;
        if (!alive()) throw new Error(`${name} exited (code ${proc.exitCode}) before ${pattern}:\n${tail()}`);
        await sleep(100);
      }
      throw new Error(`${name}: no ${pattern} within ${timeoutMs} ms:\n${tail()}`);
    },
    async stop() {
      if (!alive()) return;
      proc.kill('SIGTERM');
      const killed = await Promise.race([exited.then(() => false), sleep(15_000).then(() => true)]);
      if (killed && alive()) {
        proc.kill('SIGKILL');
        await Promise.race([exited, sleep(5_000)]);
      }
    },
  };
}

async function waitForHttp(url: string, timeoutMs: number, child: Child): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(`${child.name} exited before ${url} answered:\n${fs.readFileSync(child.log, 'utf8').split('\n').slice(-15).join('\n')}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = errorText(err);
    }
    await sleep(200);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
}

// ---------------------------------------------------------------------------------------------
// /proc sampling

function rssMb(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

function cpuTicks(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat; fields[0] here is field 3 (state).
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

function boxTicks(): { busy: number; total: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

/** Pids of the local Postgres and Redis servers (for their CPU share; they may serve others too). */
function backendPids(): number[] {
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

interface Probe {
  stop(): Resources;
}

let quietBudgetMs = QUIET_WAIT_TOTAL_MS;

/**
 * Waits until the machine is quiet (others test on it too), at most QUIET_WAIT_PER_LEVEL_MS per
 * level and QUIET_WAIT_TOTAL_MS in all; returns how busy it was in the last half second.
 */
async function waitForQuiet(): Promise<number> {
  const t0 = performance.now();
  const limit = Math.min(QUIET_WAIT_PER_LEVEL_MS, quietBudgetMs);
  for (;;) {
    const a = boxTicks();
    await sleep(500);
    const b = boxTicks();
    const busy = (100 * (b.busy - a.busy)) / Math.max(1, b.total - a.total);
    const waited = performance.now() - t0;
    if (busy < QUIET_BUSY_PCT || waited >= limit) {
      quietBudgetMs = Math.max(0, quietBudgetMs - Math.max(0, waited - 500));
      return busy;
    }
  }
}

interface Resources {
  /** Peak RSS per Agentry process during the level, MB. */
  rss: Record<string, number>;
  /**
   * CPU use in % of one core over the level. `other` is what the machine spent beyond the
   * processes named here: other people's work on a shared box (it distorts the level when large).
   */
  cpu: { agentry: number; fake: number; loadgen: number; backends: number; other: number };
  /** Whole machine, % of all cores busy. */
  box: number;
}

function startProbe(agentry: Child[], fake: Child): Probe {
  const t0 = performance.now();
  const backends = backendPids();
  const startTicks = {
    agentry: agentry.map((c) => cpuTicks(c.pid)),
    fake: cpuTicks(fake.pid),
    backends: backends.map(cpuTicks),
  };
  const loadgen0 = process.cpuUsage();
  const box0 = boxTicks();
  const peak: Record<string, number> = {};
  const sample = () => {
    for (const c of agentry) {
      const mb = rssMb(c.pid);
      if (mb !== undefined) peak[c.name] = Math.max(peak[c.name] ?? 0, mb);
    }
  };
  sample();
  const timer = setInterval(sample, 250);
  return {
    stop() {
      clearInterval(timer);
      sample();
      const seconds = (performance.now() - t0) / 1000;
      const share = (ticks: number) => (100 * ticks) / CLK_TCK / seconds;
      const lg = process.cpuUsage(loadgen0);
      const box1 = boxTicks();
      const box = (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total);
      const cpu = {
        agentry: share(agentry.reduce((sum, c, i) => sum + cpuTicks(c.pid) - startTicks.agentry[i]!, 0)),
        fake: share(cpuTicks(fake.pid) - startTicks.fake),
        loadgen: (100 * (lg.user + lg.system)) / 1e6 / seconds,
        backends: share(backends.reduce((sum, pid, i) => sum + Math.max(0, cpuTicks(pid) - startTicks.backends[i]!), 0)),
      };
      const other = Math.max(0, box * os.availableParallelism() - cpu.agentry - cpu.fake - cpu.loadgen - cpu.backends);
      return { rss: peak, cpu: { ...cpu, other }, box };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The load generator: one streaming request, timed

interface Sample {
  ok: boolean;
  error?: string;
  /** Request start to the first non-empty `delta.content`, ms. */
  ttftMs: number;
  /** Tokens received, counted in the text (the fake's deltas are one word each; Agentry may join deltas). */
  tokens: number;
  /** Tokens after the first delta per second of (last delta - first delta); Infinity when they came in one read. */
  tokensPerSecond: number;
  /** Gaps between successive content deltas, ms. */
  gaps: number[];
}

interface Endpoint {
  port: number;
  path: string;
  headers: Record<string, string>;
  body: string;
  agent: http.Agent;
}

function streamOnce(ep: Endpoint): Promise<Sample> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let firstAt = -1;
    let lastAt = -1;
    let tokens = 0;
    let deltas = 0;
    let firstTokens = 0;
    let text = '';
    let done = false;
    let settled = false;
    const gaps: number[] = [];
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!error && !done) error = 'the stream ended without data: [DONE]';
      if (!error && text !== EXPECTED_TEXT) error = `content differs from the fake's reply (${deltas} deltas, ${text.length} chars)`;
      const span = lastAt - firstAt;
      resolve({
        ok: !error,
        error,
        ttftMs: firstAt < 0 ? NaN : firstAt - t0,
        tokens,
        tokensPerSecond: tokens > firstTokens ? (span > 0.05 ? ((tokens - firstTokens) * 1000) / span : Infinity) : NaN,
        gaps,
      });
    };
    const req = http.request({ host: '127.0.0.1', port: ep.port, path: ep.path, method: 'POST', agent: ep.agent, headers: ep.headers }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c: string) => {
          if (body.length < 500) body += c;
        });
        res.on('end', () => finish(`HTTP ${res.statusCode}: ${body.slice(0, 200)}`));
        res.on('error', (err) => finish(errorText(err)));
        return;
      }
      let buf = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buf += chunk;
        for (let idx = buf.indexOf('\n\n'); idx >= 0; idx = buf.indexOf('\n\n')) {
          const event = buf.slice(0, idx);
          buf = buf.slice(idx + 2);
          for (const line of event.split('\n')) {
            if (!line.startsWith('data:')) continue; // `: ping` heartbeats, `event:` lines
            const data = line.slice(5).trim();
            if (data === '[DONE]') {
              done = true;
              continue;
            }
            let parsed: { error?: unknown; choices?: { delta?: { content?: unknown } }[] };
            try {
              parsed = JSON.parse(data) as typeof parsed;
            } catch {
              return finish(`unparseable SSE data: ${data.slice(0, 100)}`);
            }
            if (parsed.error !== undefined) return finish(`error event: ${JSON.stringify(parsed.error).slice(0, 200)}`);
            const content = parsed.choices?.[0]?.delta?.content;
            if (typeof content === 'string' && content.length > 0) {
              const words = content.split(' ').filter((w) => w !== '').length;
              if (deltas === 0) {
                firstAt = now;
                firstTokens = words;
              } else gaps.push(now - lastAt);
              lastAt = now;
              deltas++;
              tokens += words;
              text += content;
            }
          }
        }
      });
      res.on('end', () => finish());
      res.on('error', (err) => finish(errorText(err)));
      res.on('aborted', () => finish('the response was aborted'));
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`no complete answer within ${REQUEST_TIMEOUT_MS} ms`));
    }, REQUEST_TIMEOUT_MS);
    req.on('error', (err) => finish(errorText(err)));
    req.end(ep.body);
  });
}

interface LevelResult {
  n: number;
  requests: number;
  errors: number;
  errorSamples: string[];
  ttft: { p50: number; p95: number; p99: number };
  /** Per-stream tokens/s after the first token: median and 5th percentile (the slow end). */
  tps: { p50: number; p5: number };
  /** All tokens received in the level divided by its wall time. */
  aggregateTps: number;
  gapP99: number;
  wallS: number;
  /** Requests sent in the level, warm-up included. */
  sent: number;
  skipped: number;
  resources?: Resources;
}

async function runLevel(ep: Endpoint, plan: LevelPlan, probe?: () => Probe): Promise<LevelResult> {
  const recorded: Sample[] = [];
  let allTokens = 0;
  let skipped = 0;
  let sent = 0;
  const t0 = performance.now();
  const deadline = t0 + LEVEL_DEADLINE_MS;
  const p = probe?.();
  const vu = async () => {
    for (let r = 0; r < plan.warmup + plan.rounds; r++) {
      if (performance.now() > deadline) {
        skipped += plan.warmup + plan.rounds - r;
        return;
      }
      sent++;
      const s = await streamOnce(ep);
      allTokens += s.tokens;
      if (r >= plan.warmup) recorded.push(s);
    }
  };
  await Promise.all(Array.from({ length: plan.n }, vu));
  const wallS = (performance.now() - t0) / 1000;
  const resources = p?.stop();
  const ok = recorded.filter((s) => s.ok);
  const ttft = sortNum(ok.map((s) => s.ttftMs));
  const tps = sortNum(ok.map((s) => s.tokensPerSecond).filter((x) => !Number.isNaN(x)));
  const gaps = sortNum(ok.flatMap((s) => s.gaps));
  const errorSamples = [...new Set(recorded.filter((s) => !s.ok).map((s) => s.error ?? '?'))].slice(0, 3);
  return {
    n: plan.n,
    requests: recorded.length,
    errors: recorded.length - ok.length,
    errorSamples,
    ttft: { p50: pct(ttft, 50), p95: pct(ttft, 95), p99: pct(ttft, 99) },
    tps: { p50: pct(tps, 50), p5: pct(tps, 5) },
    aggregateTps: allTokens / wallS,
    gapP99: pct(gaps, 99),
    wallS,
    sent,
    skipped,
    resources,
  };
}

// ---------------------------------------------------------------------------------------------
// The systems

interface Fakes {
  byProvider: Record<string, { child: Child; port: number }>;
}

async function startFakes(logDir: string, cwd: string): Promise<Fakes> {
  const byProvider: Fakes['byProvider'] = {};
  await Promise.all(
    SCENARIOS.map(async (s) => {
      const port = await freePort();
      const child = spawnEntry(`fake-${s.id}`, 'libs/testing/src/fake-model-cli.ts', {
        env: { PORT: String(port), FAKE_TOKENS: String(TOKENS), FAKE_CHUNK_DELAY_MS: String(s.chunkDelayMs) },
        cwd,
        logDir,
      });
      cleanups.push({ name: child.name, fn: () => child.stop() });
      await child.waitForLog(/fake model listening/, START_TIMEOUT_MS);
      byProvider[s.provider] = { child, port };
    }),
  );
  return { byProvider };
}

function configYaml(fakes: Fakes, dataDir: string, concurrency: number): string {
  const providers = SCENARIOS.map(
    (s) => `    ${s.provider}: {base_url: "http://127.0.0.1:${fakes.byProvider[s.provider]!.port}/v1", api_key: "${PROVIDER_KEY}", model: fake-model}`,
  );
  return [
    'server: {host: 127.0.0.1, shutdown_timeout_ms: 3000}',
    `data: {root_dir: "${dataDir}"}`,
    `worker: {concurrency: ${concurrency}}`,
    'models:',
    `  default_provider: ${SCENARIOS[0]!.provider}`,
    '  providers:',
    ...providers,
    `channels: {api: {accounts: {bench: {name: Bench, api_key: "${ACCOUNT_KEY}"}}}}`,
    '',
  ].join('\n');
}

function agentDsl(s: Scenario) {
  return {
    ruleChain: { id: s.agentId, name: `Bench ${s.id}` },
    metadata: {
      nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: s.provider, model: 'fake-model', systemPrompt: SYSTEM_PROMPT } }],
      connections: [],
    },
  };
}

interface System {
  port: number;
  processes: Child[];
  stop(): Promise<void>;
}

async function createDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `agentry_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  // Cluster services wait for the migrate job (they no longer migrate on start): be that job.
  const handle = openPostgres({ url: url.toString() });
  try {
    await migrateToLatest(handle.db);
  } finally {
    await handle.close();
  }
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: POSTGRES_URL });
      await c.connect();
      try {
        await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

async function cleanupRedisPrefix(prefix: string): Promise<void> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    await client.connect();
    let cursor = '0';
    for (let i = 0; i < 100_000; i++) {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await client.unlink(...keys);
      cursor = next;
      if (cursor === '0') break;
    }
  } finally {
    client.disconnect();
  }
}

async function startSystem(t: TargetSpec, fakes: Fakes, workDir: string, logDir: string): Promise<System> {
  const dir = fs.mkdtempSync(path.join(workDir, `${t.id}-`));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, configYaml(fakes, path.join(dir, 'data'), t.concurrency));
  const port = await freePort();
  const secret = randomBytes(32).toString('base64');
  const processes: Child[] = [];
  const local: { name: string; fn: () => Promise<void> }[] = [];
  const stop = async () => {
    while (local.length > 0) {
      const { name, fn } = local.pop()!;
      try {
        await fn();
      } catch (err) {
        console.error(`stopping ${t.id}: ${name}: ${errorText(err)}`);
      }
    }
  };
  // Registered globally too, so that an error or a signal mid-start still cleans up.
  cleanups.push({ name: t.id, fn: stop });
  try {
    if (t.mode === 'embedded') {
      const child = spawnEntry(`${t.id}-standalone`, 'services/standalone/src/main.ts', {
        args: ['--config', config],
        env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: secret },
        cwd: dir,
        logDir,
      });
      local.push({ name: child.name, fn: () => child.stop() });
      processes.push(child);
      await waitForHttp(`http://127.0.0.1:${port}/health`, START_TIMEOUT_MS, child);
    } else {
      const db = await createDatabase();
      local.push({ name: 'database', fn: db.drop });
      const prefix = `agentry-bench-${randomBytes(5).toString('hex')}`;
      local.push({ name: 'redis keys', fn: () => cleanupRedisPrefix(prefix) });
      const env = { DATABASE_URL: db.url, REDIS_URL, REDIS_PREFIX: prefix, AGENTRY_SECRET_KEY: secret, HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
      const gateway = spawnEntry(`${t.id}-gateway`, 'services/gateway/src/main.ts', {
        args: ['--config', config],
        env: { ...env, PORT: String(port) },
        cwd: dir,
        logDir,
      });
      local.push({ name: gateway.name, fn: () => gateway.stop() });
      const worker = spawnEntry(`${t.id}-worker`, 'services/agent-worker/src/main.ts', {
        args: ['--config', config],
        env: { ...env, HEALTH_PORT: '0' },
        cwd: dir,
        logDir,
      });
      local.push({ name: worker.name, fn: () => worker.stop() });
      processes.push(gateway, worker);
      await Promise.all([waitForHttp(`http://127.0.0.1:${port}/health`, START_TIMEOUT_MS, gateway), worker.waitForLog(/agent-worker started/, START_TIMEOUT_MS)]);
    }
    // The worker logs its concurrency at start: make sure the configuration took effect.
    const workerLog = processes.at(-1)!;
    await workerLog.waitForLog(new RegExp(`"concurrency":${t.concurrency}\\b[^\\n]*agent-worker started`), 10_000);
    for (const s of SCENARIOS) {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(agentDsl(s)),
        signal: AbortSignal.timeout(10_000),
      });
      if (res.status !== 201) throw new Error(`creating agent ${s.agentId}: HTTP ${res.status} ${await res.text()}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, processes, stop };
}

function endpoints(s: Scenario, fakes: Fakes, agentryPort: number, agents: { direct: http.Agent; agentry: http.Agent }) {
  const direct: Endpoint = {
    port: fakes.byProvider[s.provider]!.port,
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER_KEY}` },
    body: JSON.stringify({
      model: 'fake-model',
      messages: [
        { role: 'system', content: SYSTEM_PROMPT },
        { role: 'user', content: USER_MESSAGE },
      ],
      stream: true,
      // What the worker's provider client sends, so the fake answers both the same way.
      stream_options: { include_usage: true },
    }),
    agent: agents.direct,
  };
  const agentry: Endpoint = {
    port: agentryPort,
    path: '/api/v1/chat/completions',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNT_KEY}` },
    body: JSON.stringify({ model: s.agentId, messages: [{ role: 'user', content: USER_MESSAGE }], stream: true }),
    agent: agents.agentry,
  };
  return { direct, agentry };
}

// ---------------------------------------------------------------------------------------------
// Report

interface Row {
  target: TargetSpec;
  scenario: Scenario;
  direct: LevelResult;
  agentry: LevelResult;
  /** Box busy % right before the level (Agentry idle), after waiting for quiet. */
  before: number;
}

const fmt = (x: number, digits = 1) => (Number.isNaN(x) ? 'n/a' : !Number.isFinite(x) ? 'burst' : x.toFixed(digits));
const fmtInt = (x: number) => (Number.isNaN(x) ? 'n/a' : !Number.isFinite(x) ? 'burst' : Math.round(x).toLocaleString('en-US'));
const signed = (x: number) => (Number.isNaN(x) ? 'n/a' : `${x >= 0 ? '+' : ''}${x.toFixed(1)}`);

function latencyTable(rows: Row[]): string {
  const head = [
    '| target | N | requests (errors) | TTFT p50 / p95 / p99 ms | direct TTFT p50 / p99 ms | **added TTFT p50 / p99 ms** | tokens/s per stream p50 (p5) | direct tokens/s per stream p50 | tokens/s all streams (direct) | inter-token gap p99 ms (direct) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const lines = rows.map(({ target, direct: d, agentry: a }) => {
    const errs = a.errors + (a.skipped > 0 ? `, ${a.skipped} not sent (deadline)` : '');
    const directErrs = d.errors > 0 ? ` [direct errors ${d.errors}]` : '';
    return (
      `| ${target.id} | ${a.n} | ${a.requests} (${errs})${directErrs} | ${fmt(a.ttft.p50)} / ${fmt(a.ttft.p95)} / ${fmt(a.ttft.p99)} | ${fmt(d.ttft.p50, 2)} / ${fmt(d.ttft.p99, 2)}` +
      ` | **${signed(a.ttft.p50 - d.ttft.p50)} / ${signed(a.ttft.p99 - d.ttft.p99)}** | ${fmtInt(a.tps.p50)} (${fmtInt(a.tps.p5)}) | ${fmtInt(d.tps.p50)}` +
      ` | ${fmtInt(a.aggregateTps)} (${fmtInt(d.aggregateTps)}) | ${fmt(a.gapP99)} (${fmt(d.gapP99)}) |`
    );
  });
  return [...head, ...lines].join('\n');
}

function resourceTable(rows: Row[]): string {
  const head = [
    '| target | N | level wall s (requests sent) | peak RSS MB | CPU % of one core: Agentry / fake / load generator / Postgres+Redis / **other** | box busy % (just before) | Agentry CPU ms per request |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  const lines = rows.map(({ target, agentry: a, before }) => {
    const r = a.resources!;
    const rss = Object.entries(r.rss)
      .map(([name, mb]) => `${name.replace(`${target.id}-`, '')} ${Math.round(mb)}`)
      .join(', ');
    const c = r.cpu;
    const perRequest = (c.agentry / 100) * a.wallS * 1000 / Math.max(1, a.sent);
    return (
      `| ${target.id} | ${a.n} | ${a.wallS.toFixed(1)} (${a.sent}) | ${rss} | ${Math.round(c.agentry)} / ${Math.round(c.fake)} / ${Math.round(c.loadgen)} / ${Math.round(c.backends)} / **${Math.round(c.other)}**` +
      ` | ${Math.round(r.box)} (${Math.round(before)}) | ${perRequest.toFixed(1)} |`
    );
  });
  return [...head, ...lines].join('\n');
}

function machine(pgVersion: string, redisVersion: string): string {
  const cpuModel = /model name\s*:\s*(.+)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  const memGb = (os.totalmem() / 1024 ** 3).toFixed(1);
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    if (dirty) commit += ' plus uncommitted changes';
  } catch {
    // not a git checkout
  }
  return [
    `- CPU: ${os.availableParallelism()} cores (nproc), ${cpuModel}`,
    `- Memory: ${memGb} GiB; Linux ${os.release()}; Node ${process.version}`,
    `- Postgres ${pgVersion}, Redis ${redisVersion}, both on 127.0.0.1 and sharing the same cores`,
    `- Code: ${commit}`,
  ].join('\n');
}

async function backendVersions(): Promise<{ pg: string; redis: string }> {
  let pgV = 'unknown';
  let redisV = 'unknown';
  try {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    try {
      pgV = String((await c.query<{ server_version: string }>('show server_version')).rows[0]?.server_version ?? 'unknown');
    } finally {
      await c.end();
    }
  } catch (err) {
    pgV = `unavailable (${errorText(err)})`;
  }
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
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

function goalCheck(rows: Row[]): string[] {
  const out: string[] = [];
  for (const r of rows.filter((x) => x.agentry.n === 200)) {
    const p50 = r.agentry.ttft.p50 - r.direct.ttft.p50;
    const p99 = r.agentry.ttft.p99 - r.direct.ttft.p99;
    const met = r.agentry.errors === 0 && p50 <= 4 && p99 <= 20;
    out.push(`- ${r.target.id}, ${r.scenario.id}: added TTFT p50 ${signed(p50)} ms, p99 ${signed(p99)} ms, ${r.agentry.errors} errors: ${met ? 'meets' : 'misses'} G1.`);
  }
  return out;
}

function section(rows: Row[], meta: { date: string; command: string; seconds: number; machine: string }): string {
  const parts = [
    MARK_START,
    '## Chat overhead: the full path versus the fake model directly',
    '',
    `Run ${meta.date} with \`${meta.command}\` (bench/chat-overhead.ts; ${Math.round(meta.seconds)} s in all). This section is written by the script; re-running replaces it.`,
    '',
    meta.machine,
    '',
    '**Method.** Three kinds of process, none sharing an event loop: the load generator (the bench process: node:http with keep-alive, SSE parsed by hand, `performance.now()`), the fake model (`libs/testing/src/fake-model-cli.ts`, one process per reply pace) and Agentry. Targets:',
    ...TARGETS.map((t) => `- \`${t.id}\`: ${t.describe}; \`worker.concurrency: ${t.concurrency}\`${t.concurrency === SHIPPED_CONCURRENCY ? ' (the default)' : ''}.`),
    '',
    `Every request is \`POST /chat/completions\` with \`stream: true\`, one user message, through an \`api\` account key, to an agent whose \`ai/agent\` node calls the fake; the fake answers ${TOKENS} content deltas (\`tok0 \` .. \`tok${TOKENS - 1} \`). "Direct" is the same load, same client, straight to the fake (system + user message), measured right before each Agentry level. N virtual users each send requests back to back (closed loop); each one's first request(s) are warm-up and not recorded. TTFT runs from the request's start to the first non-empty \`delta.content\` (Agentry's empty role chunk does not count). Tokens are counted in the text (one per word: each fake delta is one word, and Agentry may join deltas that arrive together into one chunk); tokens/s per stream is (tokens after the first delta) / (last delta - first delta); "burst" means all deltas arrived in one socket read. Added TTFT is Agentry's percentile minus the direct percentile (unpaired). An error is any non-200, error event, missing \`[DONE]\`, timeout (${REQUEST_TIMEOUT_MS / 1000} s) or a reply text that differs from the fake's. RSS is the peak VmRSS of each Agentry process during the level (sampled every 250 ms; the services run from source under tsx, as \`npm start\` does). CPU is from /proc over the level, in % of one core (the box has ${os.availableParallelism()}); Postgres+Redis counts every Postgres and Redis process on the machine, whoever they serve, and **other** is the rest of the machine's busy time (kernel loopback work, about 10-20 % here, plus other people's work on a shared box, which distorts any level where it is large). Before each level the bench waits up to ${QUIET_WAIT_PER_LEVEL_MS / 1000} s (${QUIET_WAIT_TOTAL_MS / 1000} s per run) for the box to be under ${QUIET_BUSY_PCT} % busy; "just before" is how busy it was when the level started. Agentry CPU ms per request is its CPU time over the level divided by the requests sent (warm-up included).`,
    '',
  ];
  for (const s of SCENARIOS) {
    const rs = rows.filter((r) => r.scenario.id === s.id);
    if (rs.length === 0) continue;
    const plan = s.levels.map((l) => `N=${l.n}: ${l.warmup} warm-up + ${l.rounds} recorded per user`).join('; ');
    parts.push(`### \`${s.id}\`: ${s.title}`, '', `Requests: ${plan}.`, '', latencyTable(rs), '', resourceTable(rs), '');
  }
  parts.push('**Against goal G1** (added TTFT at 200 concurrent streams p50 <= 4 ms, p99 <= 20 ms; reference/performance-and-reliability.md section 6):', '', ...goalCheck(rows), '', MARK_END);
  return parts.join('\n');
}

function writeDoc(body: string): void {
  let doc = fs.existsSync(DOC)
    ? fs.readFileSync(DOC, 'utf8')
    : [
        '# Benchmarks',
        '',
        'Speed goals are checked here, never by timed assertions in tests. Each section is written by its',
        'script between its markers (re-running the script replaces the section); the reading under a',
        'section is written by hand and names the run it reads.',
        '',
      ].join('\n');
  const a = doc.indexOf(MARK_START);
  const b = doc.indexOf(MARK_END);
  if (a >= 0 && b > a) doc = doc.slice(0, a) + body + doc.slice(b + MARK_END.length);
  else doc = `${doc.trimEnd()}\n\n${body}\n`;
  fs.writeFileSync(DOC, doc);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const started = performance.now();
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-bench-'));
  cleanups.push({ name: 'temp directory', fn: async () => fs.rmSync(workDir, { recursive: true, force: true }) });
  const logDir = path.join(workDir, 'logs');
  fs.mkdirSync(logDir);
  console.log(`bench: work directory ${workDir}; targets ${TARGETS.map((t) => t.id).join(', ')}${QUICK ? ' (quick)' : ''}`);

  const versions = await backendVersions();
  const fakes = await startFakes(logDir, workDir);
  const agents = {
    direct: new http.Agent({ keepAlive: true, maxSockets: Infinity }),
    agentry: new http.Agent({ keepAlive: true, maxSockets: Infinity }),
  };
  cleanups.push({
    name: 'http agents',
    fn: async () => {
      agents.direct.destroy();
      agents.agentry.destroy();
    },
  });

  const rows: Row[] = [];
  for (const t of TARGETS) {
    console.log(`\n== ${t.id}: starting`);
    const system = await startSystem(t, fakes, workDir, logDir);
    try {
      for (const s of SCENARIOS) {
        const ep = endpoints(s, fakes, system.port, agents);
        // Smoke test: one request each way must work before anything is measured.
        for (const [name, e] of [['direct', ep.direct], ['agentry', ep.agentry]] as const) {
          const smoke = await streamOnce(e);
          if (!smoke.ok) throw new Error(`${t.id}/${s.id}: the ${name} smoke request failed: ${smoke.error}`);
        }
        for (const plan of s.levels) {
          const before = await waitForQuiet();
          const direct = await runLevel(ep.direct, plan);
          const agentry = await runLevel(ep.agentry, plan, () => startProbe(system.processes, fakes.byProvider[s.provider]!.child));
          rows.push({ target: t, scenario: s, direct, agentry, before });
          const r = agentry.resources!;
          console.log(
            `${t.id.padEnd(14)} ${s.id.padEnd(6)} N=${String(plan.n).padEnd(4)} req ${String(agentry.requests).padStart(4)} err ${agentry.errors}` +
              ` | TTFT p50 ${fmt(agentry.ttft.p50)} p99 ${fmt(agentry.ttft.p99)} (direct ${fmt(direct.ttft.p50, 2)} / ${fmt(direct.ttft.p99, 2)})` +
              ` | tok/s/stream ${fmtInt(agentry.tps.p50)} (direct ${fmtInt(direct.tps.p50)}) all ${fmtInt(agentry.aggregateTps)}` +
              ` | cpu agentry ${Math.round(r.cpu.agentry)}% other ${Math.round(r.cpu.other)}% box ${Math.round(r.box)}% (before ${Math.round(before)}%) | ${agentry.wallS.toFixed(1)} s`,
          );
          for (const e of [...agentry.errorSamples, ...direct.errorSamples.map((x) => `direct: ${x}`)]) console.log(`    error: ${e}`);
        }
      }
    } finally {
      console.log(`== ${t.id}: stopping`);
      await system.stop();
    }
  }

  const seconds = (performance.now() - started) / 1000;
  const command = `npm run bench:chat${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`;
  const body = section(rows, { date, command, seconds, machine: machine(versions.pg, versions.redis) });
  if (WRITE) {
    writeDoc(body);
    console.log(`\nwrote ${path.relative(ROOT, DOC)} (${Math.round(seconds)} s)`);
  } else {
    console.log(`\n${body}\n\n(not written: --no-write; ${Math.round(seconds)} s)`);
  }
}

try {
  await main();
} catch (err) {
  process.exitCode = 1;
  console.error(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
} finally {
  clearTimeout(watchdog);
  if (!exiting) await runCleanups();
}
