/**
 * Issue 12, item 1: added time to first token and added time per token of the full chat path
 * (client -> gateway -> queue -> agent-worker -> provider -> pub/sub -> gateway -> SSE) versus
 * the same load sent straight to the fake model, at 1, 50, 200 and 500 concurrent streams, with
 * the count of lost, duplicated and reordered tokens (which must be zero).
 *
 *   npm run bench:chat                          # embedded and cluster, writes docs/benchmarks.md
 *   npm run bench:chat -- --targets=cluster     # a subset (embedded, cluster, embedded-c100, cluster-c100)
 *   npm run bench:chat -- --quick --no-write    # fewer requests, print only
 *   npm run bench:chat -- --runtime=tsx         # Agentry from its sources under tsx (the default is compiled, as every start path runs it)
 *   npm run bench:chat -- --resume-only         # only the resume table (dropped streams resumed), printed, not written
 *   npm run bench:chat -- --levels=paced:200    # only these levels (scenario:N, comma-separated), printed, not written; no resume or per-run part
 *
 * After the levels of each target, streams are dropped mid-answer and resumed with
 * `GET /runs/{id}/events` and `Last-Event-ID` (issue 27 item 1): the time to the first resumed
 * chunk, and every token checked once and in order across the drop.
 * Three kinds of process, none sharing an event loop: this process is the load generator
 * (node:http, keep-alive, SSE parsed by hand, performance.now()); the fake model is
 * bench/fake-model.ts (one process answering at once, one at 50 tokens/s); Agentry runs as its
 * real entry points (embedded: the standalone on PGlite; cluster: gateway + one agent-worker on
 * the local Postgres and Redis, in a throwaway database). Everything on 127.0.0.1; every loop is
 * bounded; children, the database, the Redis keys and the temporary directory are removed on every
 * exit path. Not part of `npm test`.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fakeAnswer } from './fake-model.js';
import { fidelityOf, streamOnce, type Endpoint, type Fidelity, type Sample, type StreamExpectation } from './sse-client.js';
import { freePort } from '@agentry/testing';
import {
  BENCH_POSTGRES_URL,
  BENCH_REDIS_URL,
  CLK_TCK,
  backendPids,
  backendVersions,
  boxTicks,
  commandLine,
  cpuTicks,
  createBenchDatabase,
  errorText,
  machineLine,
  measureRunCost,
  onCleanup,
  pct,
  rssMb,
  runBench,
  sleep,
  sortNum,
  spawnEntry,
  startPrivateRedis,
  waitForHttp,
  waitForQuietBox,
  writeDocSection,
  type Child,
  type RunCost,
} from './lib.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
for (const a of argv) {
  if (!/^--(quick|no-write|resume-only|targets=.+|levels=.+|runtime=(tsx|node))$/.test(a)) {
    console.error(`unknown argument ${a}; use --targets=embedded,cluster,embedded-c100,cluster-c100 --levels=burst:1,paced:200 --quick --no-write --resume-only --runtime=tsx|node`);
    process.exit(2);
  }
}
const QUICK = argv.includes('--quick');
const RESUME_ONLY = argv.includes('--resume-only');
/** `--levels=paced:200,burst:1`: only these levels (a profile of one load needs nothing else). */
const LEVELS = option('levels')?.split(',');
// The section is written whole: a run of the resume part or of some levels alone only prints.
const WRITE = !argv.includes('--no-write') && !RESUME_ONLY && !LEVELS;
const RUNTIME = option('runtime') === 'tsx' ? 'tsx' : 'node';

const POSTGRES_URL = BENCH_POSTGRES_URL;
const REDIS_URL = BENCH_REDIS_URL;

/** Deltas per reply; the fake sends `tok0 ` .. `tok49 `. */
const TOKENS = 50;
const EXPECTED_TEXT = fakeAnswer(TOKENS);
const SYSTEM_PROMPT = 'You are the benchmark agent.';
const USER_MESSAGE = 'Say fifty tokens.';
const ACCOUNT_KEY = `sk-bench-${randomBytes(16).toString('hex')}`;
const PROVIDER_KEY = `sk-bench-provider-${randomBytes(8).toString('hex')}`;
const SHIPPED_CONCURRENCY = 100;
/**
 * Run slots for every level's streams at once: with the shipped 100, a level of 200 or 500
 * paced streams measures the slot limit (the rest wait their turn) rather than the path.
 */
const BENCH_CONCURRENCY = 500;

const REQUEST_TIMEOUT_MS = 60_000;
const LEVEL_DEADLINE_MS = 90_000;
const START_TIMEOUT_MS = 90_000;
/** Before each level the bench waits (bounded) for the shared box to be this quiet, in % busy. */
const QUIET_BUSY_PCT = 15;
const QUIET_WAIT_PER_LEVEL_MS = 15_000;
const QUIET_WAIT_TOTAL_MS = 90_000;

interface LevelPlan {
  n: number;
  /**
   * Spread the users' first requests evenly over this many ms (one answer's length), so the
   * level measures N streams open at once rather than N arriving in the same millisecond.
   */
  staggerMs?: number;
  /** Requests each virtual user sends first, not recorded (JIT, pools, sockets). */
  warmup: number;
  /** Recorded requests per virtual user. */
  rounds: number;
}

interface Scenario {
  id: string;
  title: string;
  tokensPerSecond: number;
  provider: string;
  agentId: string;
  levels: LevelPlan[];
}

const q = (full: number, quick: number) => (QUICK ? quick : full);
const SCENARIOS: Scenario[] = [
  {
    id: 'burst',
    title: `${TOKENS} deltas, no delay between them (the relay at full speed)`,
    tokensPerSecond: 0,
    provider: 'fake',
    agentId: 'bench-burst',
    levels: [
      { n: 1, warmup: 10, rounds: q(100, 30) },
      { n: 50, warmup: 1, rounds: q(6, 2) },
      { n: 200, warmup: 1, rounds: q(3, 1) },
      { n: 500, warmup: 1, rounds: q(2, 1) },
    ],
  },
  {
    id: 'paced',
    title: `${TOKENS} deltas at 50 tokens/s (a realistic model; added time per token is measured here)`,
    tokensPerSecond: 50,
    provider: 'fake50',
    agentId: 'bench-paced',
    levels: [
      // Each answer lasts a second: users start spread over that second, the first round
      // (arrivals still ramping up) is warm-up, and the recorded rounds see N streams open.
      { n: 1, warmup: 1, rounds: q(5, 2) },
      { n: 50, warmup: 1, rounds: q(2, 1), staggerMs: 1000 },
      { n: 200, warmup: 1, rounds: q(2, 1), staggerMs: 1000 },
      { n: 500, warmup: 1, rounds: q(2, 1), staggerMs: 1000 },
    ],
  },
];

interface TargetSpec {
  id: string;
  mode: 'embedded' | 'cluster';
  concurrency: number;
  describe: string;
}

const how = RUNTIME === 'node' ? 'compiled (`node dist/src/main.js`, as the image and `npm run start:*` run it)' : 'under tsx (development)';
const ALL_TARGETS: TargetSpec[] = [
  { id: 'embedded', mode: 'embedded', concurrency: BENCH_CONCURRENCY, describe: `the standalone ${how}: one process, PGlite, in-process bus` },
  { id: 'cluster', mode: 'cluster', concurrency: BENCH_CONCURRENCY, describe: `gateway + one agent-worker ${how}, Postgres and Redis on 127.0.0.1` },
  { id: 'embedded-c100', mode: 'embedded', concurrency: SHIPPED_CONCURRENCY, describe: 'as `embedded`' },
  { id: 'cluster-c100', mode: 'cluster', concurrency: SHIPPED_CONCURRENCY, describe: 'as `cluster`' },
];

const wanted = (option('targets') ?? 'embedded,cluster').split(',');
const unknownTarget = wanted.find((id) => !ALL_TARGETS.some((t) => t.id === id));
if (unknownTarget) {
  console.error(`unknown target ${unknownTarget}; known: ${ALL_TARGETS.map((t) => t.id).join(', ')}`);
  process.exit(2);
}
const TARGETS = ALL_TARGETS.filter((t) => wanted.includes(t.id));

// ---------------------------------------------------------------------------------------------
// Machine sampling

let quietBudgetMs = QUIET_WAIT_TOTAL_MS;

/**
 * Waits until the machine is quiet (others may work on it too), at most QUIET_WAIT_PER_LEVEL_MS
 * per level and QUIET_WAIT_TOTAL_MS in all; returns how busy it was in the last half second.
 */
async function waitForQuiet(): Promise<number> {
  const { busy, waitedMs } = await waitForQuietBox(QUIET_BUSY_PCT, Math.min(QUIET_WAIT_PER_LEVEL_MS, quietBudgetMs));
  quietBudgetMs = Math.max(0, quietBudgetMs - Math.max(0, waitedMs - 500));
  return busy;
}

interface Resources {
  /** Peak RSS per Agentry process during the level, MB. */
  rss: Record<string, number>;
  /**
   * CPU use in % of one core over the level. `other` is what the machine spent beyond the
   * processes named here: other work on a shared box (it distorts the level when large).
   */
  cpu: { agentry: number; fake: number; loadgen: number; backends: number; other: number };
  /** Whole machine, % of all cores busy. */
  box: number;
}

function startProbe(agentry: Child[], fake: Child): { stop(): Resources } {
  const t0 = performance.now();
  const backends = backendPids();
  const startTicks = { agentry: agentry.map((c) => cpuTicks(c.pid)), fake: cpuTicks(fake.pid), backends: backends.map(cpuTicks) };
  const loadgen0 = process.cpuUsage();
  const box0 = boxTicks();
  const peak: Record<string, number> = {};
  const sample = () => {
    for (const c of agentry) {
      const mb = rssMb(c.pid);
      if (!Number.isNaN(mb)) peak[c.name] = Math.max(peak[c.name] ?? 0, mb);
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
// The load generator: one streaming request (bench/sse-client.ts), timed and checked token by token

const EXPECT: StreamExpectation = { tokens: TOKENS, text: EXPECTED_TEXT, timeoutMs: REQUEST_TIMEOUT_MS };

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
  gap: { p50: number; p95: number; p99: number };
  /** Summed over every request of the level, errors included. */
  fidelity: Fidelity;
  wallS: number;
  /** Requests sent in the level, warm-up included. */
  sent: number;
  skipped: number;
  resources?: Resources;
}

async function runLevel(ep: Endpoint, plan: LevelPlan, probe?: () => { stop(): Resources }): Promise<LevelResult> {
  const recorded: Sample[] = [];
  const warmupErrors: string[] = [];
  const fidelity: Fidelity = { lost: 0, duplicated: 0, reordered: 0 };
  let allTokens = 0;
  let skipped = 0;
  let sent = 0;
  const t0 = performance.now();
  const deadline = t0 + LEVEL_DEADLINE_MS;
  const p = probe?.();
  const vu = async (_: unknown, i: number) => {
    if (plan.staggerMs) await sleep((plan.staggerMs * i) / plan.n);
    for (let r = 0; r < plan.warmup + plan.rounds; r++) {
      if (performance.now() > deadline) {
        skipped += plan.warmup + plan.rounds - r;
        return;
      }
      sent++;
      const s = await streamOnce(ep, EXPECT);
      allTokens += s.tokens;
      fidelity.lost += s.fidelity.lost;
      fidelity.duplicated += s.fidelity.duplicated;
      fidelity.reordered += s.fidelity.reordered;
      if (r >= plan.warmup) recorded.push(s);
      else if (!s.ok) warmupErrors.push(s.error ?? '?');
    }
  };
  await Promise.all(Array.from({ length: plan.n }, vu));
  const wallS = (performance.now() - t0) / 1000;
  const resources = p?.stop();
  const ok = recorded.filter((s) => s.ok);
  const ttft = sortNum(ok.map((s) => s.ttftMs));
  const tps = sortNum(ok.map((s) => s.tokensPerSecond).filter((x) => !Number.isNaN(x)));
  const gaps = sortNum(ok.flatMap((s) => s.gaps));
  // Warm-up failures are not counted as errors, but their lost tokens are: say what they were.
  const errorSamples = [...new Set([...recorded.filter((s) => !s.ok).map((s) => s.error ?? '?'), ...warmupErrors.map((e) => `warm-up: ${e}`)])].slice(0, 3);
  return {
    n: plan.n,
    requests: recorded.length,
    errors: recorded.length - ok.length,
    errorSamples,
    ttft: { p50: pct(ttft, 50), p95: pct(ttft, 95), p99: pct(ttft, 99) },
    tps: { p50: pct(tps, 50), p5: pct(tps, 5) },
    aggregateTps: allTokens / wallS,
    gap: { p50: pct(gaps, 50), p95: pct(gaps, 95), p99: pct(gaps, 99) },
    fidelity,
    wallS,
    sent,
    skipped,
    ...(resources ? { resources } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Resume: a stream dropped mid-answer and resumed with GET /runs/{id}/events + Last-Event-ID

/** Streams dropped and resumed per target and reconnect delay, one at a time. */
const RESUME_STREAMS = q(20, 5);
/** The client drops its connection once it has this many tokens (of TOKENS, paced: 0.4 s in). */
const RESUME_DROP_AFTER = 20;
/**
 * How long the client waits before it reconnects: at once (the resumed stream mostly waits for
 * the next live token), and after 250 ms (about a dozen tokens missed, replayed from the kept log).
 */
const RESUME_DELAYS_MS = [0, 250];

interface ResumeSample {
  ok: boolean;
  error?: string;
  /** Reconnect (the GET sent) to the first resumed `data:` event, ms. */
  firstMs: number;
  before: number;
  after: number;
  fidelity: Fidelity;
}

interface ResumeResult {
  target: TargetSpec;
  delayMs: number;
  streams: number;
  errors: number;
  errorSamples: string[];
  first: { p50: number; p95: number; max: number };
  tokensBefore: number;
  tokensAfter: number;
  fidelity: Fidelity;
}

/** One SSE event as the streams write it: its `id:` (the run event's, `<runId>:<seq>`) and its data. */
interface SseEvent {
  id?: string;
  data: string;
}

/**
 * Sends a request and hands each whole SSE event to `onEvent` as it arrives; `onEvent` returns
 * false to drop the connection there (events after it in the same read are not the client's).
 * Resolves when the stream ended or was dropped; rejects on a non-200 or a broken connection.
 */
function sseRequest(opts: http.RequestOptions, body: string | undefined, onEvent: (e: SseEvent, at: number) => boolean): Promise<'ended' | 'dropped'> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const req = http.request({ host: '127.0.0.1', ...opts }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (c: string) => (text += c.slice(0, 500)));
        res.on('end', () => settle(() => reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`))));
        return;
      }
      let buf = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buf += chunk;
        for (let idx = buf.indexOf('\n\n'); idx >= 0 && !settled; idx = buf.indexOf('\n\n')) {
          const lines = buf.slice(0, idx).split('\n');
          buf = buf.slice(idx + 2);
          const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
          if (data.length === 0) continue; // `: ping` heartbeats
          const id = lines.find((l) => l.startsWith('id:'))?.slice(3).trim();
          let more: boolean;
          try {
            more = onEvent({ ...(id ? { id } : {}), data: data.join('\n') }, now);
          } catch (err) {
            req.destroy();
            return settle(() => reject(err as Error));
          }
          if (!more) {
            req.destroy();
            settle(() => resolve('dropped'));
          }
        }
      });
      res.on('end', () => settle(() => resolve('ended')));
      res.on('error', (err) => settle(() => reject(err)));
      res.on('aborted', () => settle(() => reject(new Error('the response was aborted'))));
    });
    const timer = setTimeout(() => req.destroy(new Error(`no complete answer within ${REQUEST_TIMEOUT_MS} ms`)), REQUEST_TIMEOUT_MS);
    req.on('error', (err) => settle(() => reject(err)));
    req.end(body);
  });
}

/** The `tok<i>` indices of a chat chunk's content (an error event throws: it is not an answer). */
function tokensOf(data: string): { text: string; indices: number[] } {
  if (data === '[DONE]') return { text: '', indices: [] };
  const parsed = JSON.parse(data) as { error?: unknown; choices?: { delta?: { content?: unknown } }[] };
  if (parsed.error !== undefined) throw new Error(`error event: ${JSON.stringify(parsed.error).slice(0, 200)}`);
  const content = parsed.choices?.[0]?.delta?.content;
  if (typeof content !== 'string') return { text: '', indices: [] };
  const indices = content
    .split(' ')
    .filter(Boolean)
    .map((w) => Number(/^tok(\d+)$/.exec(w)?.[1] ?? -1));
  return { text: content, indices };
}

/**
 * One streamed chat dropped after RESUME_DROP_AFTER tokens, on an event with an id (what the
 * client has is everything up to it), then resumed `delayMs` later from that id.
 */
async function resumeOnce(ep: Endpoint, delayMs: number): Promise<ResumeSample> {
  const indices: number[] = [];
  let text = '';
  let lastId: string | undefined;
  let before = 0;
  let firstAt = -1;
  let done = false;
  let sentAt = 0;
  try {
    const first = await sseRequest({ port: ep.port, path: ep.path, method: 'POST', agent: ep.agent, headers: ep.headers }, ep.body, (e) => {
      const got = tokensOf(e.data);
      indices.push(...got.indices);
      text += got.text;
      if (e.id) lastId = e.id;
      return !(indices.length >= RESUME_DROP_AFTER && e.id);
    });
    if (first !== 'dropped' || !lastId) throw new Error(`the answer ended before ${RESUME_DROP_AFTER} tokens`);
    before = indices.length;
    await sleep(delayMs);
    const runId = lastId.split(':')[0]!;
    sentAt = performance.now();
    await sseRequest(
      { port: ep.port, path: `/api/v1/runs/${runId}/events`, method: 'GET', agent: ep.agent, headers: { authorization: ep.headers.authorization!, 'last-event-id': lastId } },
      undefined,
      (e, at) => {
        if (firstAt < 0) firstAt = at;
        if (e.data === '[DONE]') done = true;
        const got = tokensOf(e.data);
        indices.push(...got.indices);
        text += got.text;
        return true;
      },
    );
    if (!done) throw new Error('the resumed stream ended without data: [DONE]');
    if (text !== EXPECTED_TEXT) throw new Error(`content across the drop differs from the fake's reply (${indices.length} tokens, ${text.length} chars)`);
    return { ok: true, firstMs: firstAt - sentAt, before, after: indices.length - before, fidelity: fidelityOf(indices, TOKENS) };
  } catch (err) {
    return { ok: false, error: errorText(err), firstMs: NaN, before, after: indices.length - before, fidelity: fidelityOf(indices, TOKENS) };
  }
}

async function runResume(target: TargetSpec, ep: Endpoint, delayMs: number): Promise<ResumeResult> {
  const samples: ResumeSample[] = [];
  for (let i = 0; i < RESUME_STREAMS; i++) samples.push(await resumeOnce(ep, delayMs));
  const ok = samples.filter((s) => s.ok);
  const first = sortNum(ok.map((s) => s.firstMs));
  const sum = (f: (s: ResumeSample) => number) => samples.reduce((n, s) => n + f(s), 0);
  return {
    target,
    delayMs,
    streams: samples.length,
    errors: samples.length - ok.length,
    errorSamples: [...new Set(samples.filter((s) => !s.ok).map((s) => s.error ?? '?'))].slice(0, 3),
    first: { p50: pct(first, 50), p95: pct(first, 95), max: first.at(-1) ?? NaN },
    tokensBefore: sum((s) => s.before) / samples.length,
    tokensAfter: sum((s) => s.after) / samples.length,
    fidelity: { lost: sum((s) => s.fidelity.lost), duplicated: sum((s) => s.fidelity.duplicated), reordered: sum((s) => s.fidelity.reordered) },
  };
}

// ---------------------------------------------------------------------------------------------
// The systems

type Fakes = Record<string, { child: Child; port: number }>;

async function startFakes(work: string): Promise<Fakes> {
  const fakes: Fakes = {};
  await Promise.all(
    SCENARIOS.map(async (s) => {
      const port = await freePort();
      const child = spawnEntry(`fake-${s.id}`, 'bench/fake-model.ts', {
        args: [`--port=${port}`, '--ttft-ms=0', `--tokens-per-second=${s.tokensPerSecond}`, `--tokens=${TOKENS}`],
        cwd: work,
      });
      onCleanup(child.name, () => child.stop());
      await child.waitForLog(/fake model listening/, START_TIMEOUT_MS);
      fakes[s.provider] = { child, port };
    }),
  );
  return fakes;
}

function configYaml(fakes: Fakes, dataDir: string, concurrency: number): string {
  const providers = SCENARIOS.map((s) => `    ${s.provider}: {base_url: "http://127.0.0.1:${fakes[s.provider]!.port}/v1", api_key: "${PROVIDER_KEY}", model: fake-model}`);
  return [
    // Every stream comes from this one address: the per-address connection cap (256) would refuse the 500 level.
    'server: {host: 127.0.0.1, shutdown_timeout_ms: 3000, max_connections_per_address: 0}',
    `data: {root_dir: "${dataDir}"}`,
    `worker: {concurrency: ${concurrency}}`,
    'models:',
    `  default_provider: ${SCENARIOS[0]!.provider}`,
    '  providers:',
    ...providers,
    `channels: {api: {accounts: {bench: {name: Bench, api_key: "${ACCOUNT_KEY}"}}}}`,
    // One key sends every request: the per-credential chat limit (600 a minute by default) is off.
    'security: {rateLimit: {chat: {requests: 0}}}',
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
  /** Cluster: its own database and Redis server, whose counters say what a run costs them. */
  backends?: { database: string; redisUrl: string };
}

async function startSystem(t: TargetSpec, fakes: Fakes, work: string): Promise<System> {
  const dir = fs.mkdtempSync(path.join(work, `${t.id}-`));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, configYaml(fakes, path.join(dir, 'data'), t.concurrency));
  const port = await freePort();
  const secret = randomBytes(32).toString('base64');
  const processes: Child[] = [];
  let backends: System['backends'];
  const local: Array<() => Promise<void>> = [];
  const stop = async () => {
    while (local.length > 0) {
      try {
        await local.pop()!();
      } catch (err) {
        console.error(`stopping ${t.id}: ${errorText(err)}`);
      }
    }
  };
  // Registered globally too, so that an error or a signal mid-start still cleans up.
  onCleanup(t.id, stop);
  try {
    if (t.mode === 'embedded') {
      const child = spawnEntry(`${t.id}-standalone`, 'services/standalone/src/main.ts', {
        args: ['--config', config],
        env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: secret },
        cwd: dir,
        runtime: RUNTIME,
      });
      local.push(() => child.stop());
      processes.push(child);
      await waitForHttp(`http://127.0.0.1:${port}/health`, START_TIMEOUT_MS, child);
    } else {
      const db = await createBenchDatabase(POSTGRES_URL);
      local.push(db.drop);
      const prefix = `agentry-bench-${randomBytes(5).toString('hex')}`;
      // A Redis server of its own, so that INFO commandstats counts only this cluster's commands.
      const redis = await startPrivateRedis(await freePort());
      local.push(() => redis.stop());
      backends = { database: db.name, redisUrl: redis.url };
      const env = { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_PREFIX: prefix, AGENTRY_SECRET_KEY: secret, HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
      const gateway = spawnEntry(`${t.id}-gateway`, 'services/gateway/src/main.ts', { args: ['--config', config], env: { ...env, PORT: String(port) }, cwd: dir, runtime: RUNTIME });
      local.push(() => gateway.stop());
      const worker = spawnEntry(`${t.id}-worker`, 'services/agent-worker/src/main.ts', { args: ['--config', config], env: { ...env, HEALTH_PORT: '0' }, cwd: dir, runtime: RUNTIME });
      local.push(() => worker.stop());
      processes.push(gateway, worker);
      await Promise.all([waitForHttp(`http://127.0.0.1:${port}/health`, START_TIMEOUT_MS, gateway), worker.waitForLog(/agent-worker started/, START_TIMEOUT_MS)]);
    }
    // The worker logs its concurrency at start: make sure the configuration took effect.
    await processes.at(-1)!.waitForLog(new RegExp(`"concurrency":${t.concurrency}\\b[^\\n]*agent-worker started`), 10_000);
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
  return { port, processes, stop, ...(backends ? { backends } : {}) };
}

function endpoints(s: Scenario, fakes: Fakes, agentryPort: number, agents: { direct: http.Agent; agentry: http.Agent }) {
  const direct: Endpoint = {
    port: fakes[s.provider]!.port,
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
const fid = (f: Fidelity) => `${f.lost} / ${f.duplicated} / ${f.reordered}`;

function latencyTable(rows: Row[], paced: boolean): string {
  const head = [
    `| target | N | requests (errors) | TTFT p50 / p95 / p99 ms | direct TTFT p50 / p99 ms | **added TTFT p50 / p99 ms** | tokens/s per stream p50 (p5) | direct p50 | tokens/s all streams (direct) | ${paced ? 'token gap p50 / p95 / p99 ms (direct) | **added per token p50 / p99 ms**' : 'token gap p99 ms (direct)'} | lost / duplicated / reordered tokens |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|${paced ? '---:|' : ''}---:|`,
  ];
  const lines = rows.map(({ target, direct: d, agentry: a }) => {
    const errs = a.errors + (a.skipped > 0 ? `, ${a.skipped} not sent (deadline)` : '');
    const directErrs = d.errors > 0 ? ` [direct errors ${d.errors}]` : '';
    const gapCols = paced
      ? `${fmt(a.gap.p50)} / ${fmt(a.gap.p95)} / ${fmt(a.gap.p99)} (${fmt(d.gap.p50)} / ${fmt(d.gap.p95)} / ${fmt(d.gap.p99)}) | **${signed(a.gap.p50 - d.gap.p50)} / ${signed(a.gap.p99 - d.gap.p99)}**`
      : `${fmt(a.gap.p99)} (${fmt(d.gap.p99)})`;
    return (
      `| ${target.id} | ${a.n} | ${a.requests} (${errs})${directErrs} | ${fmt(a.ttft.p50)} / ${fmt(a.ttft.p95)} / ${fmt(a.ttft.p99)} | ${fmt(d.ttft.p50, 2)} / ${fmt(d.ttft.p99, 2)}` +
      ` | **${signed(a.ttft.p50 - d.ttft.p50)} / ${signed(a.ttft.p99 - d.ttft.p99)}** | ${fmtInt(a.tps.p50)} (${fmtInt(a.tps.p5)}) | ${fmtInt(d.tps.p50)}` +
      ` | ${fmtInt(a.aggregateTps)} (${fmtInt(d.aggregateTps)}) | ${gapCols} | ${fid(a.fidelity)} |`
    );
  });
  return [...head, ...lines].join('\n');
}

/** Per cluster target: what one streamed run costs Postgres and Redis (counted after its levels). */
const costs = new Map<string, RunCost>();
const COST_RUNS = 200;

function resourceTable(rows: Row[]): string {
  const head = [
    '| target | N | level wall s (requests sent) | peak RSS MB | CPU % of one core: Agentry / fake / load generator / Postgres+Redis / **other** | box busy % (just before) | Agentry CPU ms per request | per run: Postgres transactions / rows written / Redis commands |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const lines = rows.map(({ target, agentry: a, before }) => {
    const r = a.resources!;
    const rss = Object.entries(r.rss)
      .map(([name, mb]) => `${name.replace(`${target.id}-`, '')} ${Math.round(mb)}`)
      .join(', ');
    const c = r.cpu;
    const perRequest = ((c.agentry / 100) * a.wallS * 1000) / Math.max(1, a.sent);
    return (
      `| ${target.id} | ${a.n} | ${a.wallS.toFixed(1)} (${a.sent}) | ${rss} | ${Math.round(c.agentry)} / ${Math.round(c.fake)} / ${Math.round(c.loadgen)} / ${Math.round(c.backends)} / **${Math.round(c.other)}**` +
      ` | ${Math.round(r.box)} (${Math.round(before)}) | ${perRequest.toFixed(1)} | ${costOf(target.id)} |`
    );
  });
  return [...head, ...lines].join('\n');
}

function costOf(target: string): string {
  const c = costs.get(target);
  return c ? `${c.xacts.toFixed(1)} / ${c.written.toFixed(1)} / ${c.redis.toFixed(1)}` : '-';
}

/** Issue 12's targets, checked on the cluster rows at 200 streams (and fidelity everywhere). */
function goalCheck(rows: Row[]): string[] {
  const out: string[] = [];
  for (const r of rows.filter((x) => x.agentry.n === 200)) {
    const p50 = r.agentry.ttft.p50 - r.direct.ttft.p50;
    const p99 = r.agentry.ttft.p99 - r.direct.ttft.p99;
    const met = r.agentry.errors === 0 && p50 <= 3 && p99 <= 15;
    out.push(`- ${r.target.id}, ${r.scenario.id}, N=200: added TTFT p50 ${signed(p50)} ms, p99 ${signed(p99)} ms, ${r.agentry.errors} errors: ${met ? 'meets' : 'misses'} the target (p50 <= 3, p99 <= 15).`);
  }
  for (const r of rows.filter((x) => x.scenario.tokensPerSecond > 0)) {
    const added = r.agentry.gap.p99 - r.direct.gap.p99;
    out.push(`- ${r.target.id}, paced, N=${r.agentry.n}: added per-token p99 ${signed(added)} ms: ${added <= 2 ? 'meets' : 'misses'} the target (<= 2).`);
  }
  const bad = rows.filter((r) => r.agentry.fidelity.lost + r.agentry.fidelity.duplicated + r.agentry.fidelity.reordered > 0);
  out.push(
    bad.length === 0
      ? `- Lost, duplicated or reordered tokens: 0 in every level (${rows.reduce((s, r) => s + r.agentry.sent, 0)} streams): meets the target.`
      : `- Lost, duplicated or reordered tokens in ${bad.map((r) => `${r.target.id}/${r.scenario.id}/N=${r.agentry.n} (${fid(r.agentry.fidelity)})`).join(', ')}: misses the target (0).`,
  );
  return out;
}

function resumeTable(results: ResumeResult[]): string {
  const head = [
    '| target | reconnect | streams (errors) | reconnect to first resumed chunk p50 / p95 / max ms | tokens before / after the drop (mean) | lost / duplicated / reordered tokens |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  const lines = results.map(
    (r) =>
      `| ${r.target.id} | ${r.delayMs === 0 ? 'at once' : `after ${r.delayMs} ms`} | ${r.streams} (${r.errors}) | ${fmt(r.first.p50)} / ${fmt(r.first.p95)} / ${fmt(r.first.max)} | ${fmt(r.tokensBefore)} / ${fmt(r.tokensAfter)} | ${fid(r.fidelity)} |`,
  );
  return [...head, ...lines].join('\n');
}

function resumeSection(results: ResumeResult[]): string[] {
  if (results.length === 0) return [];
  return [
    '### Resume: streams dropped mid-answer and resumed with `GET /runs/{id}/events`',
    '',
    `Per target and reconnect delay, ${RESUME_STREAMS} streams of the \`paced\` agent, one at a time: the client reads until it has ${RESUME_DROP_AFTER} of the ${TOKENS} tokens, on an event with an \`id:\` line, closes its connection there (whatever else came in the same socket read is not counted as received), waits (0 or ${RESUME_DELAYS_MS[1]} ms) and sends \`GET /api/v1/runs/{runId}/events\` with \`Last-Event-ID: <that id>\`, through the same deployment (one gateway: the cross-gateway case, the serving gateway killed, is e2e/resume-cluster.test.ts). The latency runs from that GET to its first \`data:\` event; reconnecting at once, that is drop to first resumed chunk, and it mostly waits for the next live token (one every 20 ms); after ${RESUME_DELAYS_MS[1]} ms the missed tokens come from the kept log at once. Lost, duplicated and reordered count the tokens before and after the drop together against 0..${TOKENS - 1}; an error is a non-200, an error event, no \`[DONE]\` or a text across the drop that differs from the fake's.`,
    '',
    resumeTable(results),
    '',
  ];
}

/** Issue 27 item 1: a resumed stream loses, doubles and reorders nothing. */
function resumeCheck(results: ResumeResult[]): string[] {
  if (results.length === 0) return [];
  const streams = results.reduce((n, r) => n + r.streams, 0);
  const errors = results.reduce((n, r) => n + r.errors, 0);
  const bad = results.filter((r) => r.fidelity.lost + r.fidelity.duplicated + r.fidelity.reordered > 0);
  return [
    bad.length === 0 && errors === 0
      ? `- Resumed streams (issue 27): 0 lost, duplicated or reordered tokens and 0 errors in ${streams} dropped and resumed streams: meets the target.`
      : `- Resumed streams (issue 27): ${errors} errors; lost / duplicated / reordered ${bad.map((r) => `${r.target.id}/${r.delayMs} ms (${fid(r.fidelity)})`).join(', ') || 'none'}: misses the target (0).`,
  ];
}

function section(rows: Row[], resumes: ResumeResult[], meta: { date: string; seconds: number; pg: string; redis: string }): string {
  const parts = [
    '<!-- bench:chat-overhead:start -->',
    '## Chat overhead: the full path versus the fake model directly',
    '',
    `Run ${meta.date} with \`${commandLine('bench:chat')}\` (bench/chat-overhead.ts; ${Math.round(meta.seconds)} s in all). Machine: ${machineLine()}. Postgres ${meta.pg}, Redis ${meta.redis}, on 127.0.0.1 and sharing the same cores. Written by the script; re-running replaces it.`,
    '',
    '**Method.** Three kinds of process, none sharing an event loop: the load generator (the bench process: node:http with keep-alive, SSE parsed by hand, `performance.now()`), the fake model (`bench/fake-model.ts`, one process per pace, no time to first token) and Agentry. Targets:',
    ...TARGETS.map((t) => `- \`${t.id}\`: ${t.describe}; \`worker.concurrency: ${t.concurrency}\`${t.concurrency === SHIPPED_CONCURRENCY ? ' (the default)' : ` (the default is ${SHIPPED_CONCURRENCY}: raised so that every stream of a level has a run slot)`}.`),
    '',
    `Every request is \`POST /chat/completions\` with \`stream: true\`, one user message, through an \`api\` account key, to an agent whose \`ai/agent\` node calls the fake; the fake answers ${TOKENS} content deltas (\`tok0 \` .. \`tok${TOKENS - 1} \`). "Direct" is the same load, same client, straight to the fake (system + user message), measured right before each Agentry level. N virtual users each send requests back to back (closed loop); each one's first request(s) are warm-up and not recorded. In \`burst\` all N start at once (a thundering herd: the level measures how fast N simultaneous arrivals are absorbed); in \`paced\` their first requests are spread over one answer's length, so the recorded rounds see N streams open at once with about N arrivals a second. TTFT runs from the request's start to the first non-empty \`delta.content\` (Agentry's empty role chunk does not count). Each token is a word \`tok<i>\` wherever it arrives (Agentry may join deltas that arrive together into one chunk): lost, duplicated and reordered count the tokens of every stream of the level that answered 200 (warm-up included) against 0..${TOKENS - 1} in order. The token gap is the arrival time of each token minus the previous one's (0 for a token joined into the same chunk); added per token is Agentry's gap percentile minus the direct one (paced only: in a burst every gap is 0 on both sides). Tokens/s per stream is (tokens after the first) / (last - first token); "burst" means all arrived in one socket read. Added TTFT is Agentry's percentile minus the direct percentile (unpaired). An error is any non-200, error event, missing \`[DONE]\`, timeout (${REQUEST_TIMEOUT_MS / 1000} s) or a reply text that differs from the fake's. RSS is the peak VmRSS of each Agentry process during the level (sampled every 250 ms). CPU is from /proc over the level, in % of one core (the box has ${os.availableParallelism()}); Postgres+Redis counts every Postgres and Redis process on the machine, whoever they serve, and **other** is the rest of the machine's busy time (kernel loopback work plus other work on a shared box, which distorts any level where it is large). Before each level the bench waits up to ${QUIET_WAIT_PER_LEVEL_MS / 1000} s (${QUIET_WAIT_TOTAL_MS / 1000} s per run) for the box to be under ${QUIET_BUSY_PCT} % busy; "just before" is how busy it was when the level started. Agentry CPU ms per request is its CPU time over the level divided by the requests sent (warm-up included). Per run (cluster targets: their own database and a Redis server of the bench's own): after the levels, ${COST_RUNS} more burst streams between idle windows of 11 s (Postgres reports a backend's counters when idle), from \`pg_stat_database\` (transactions: a statement outside BEGIN..COMMIT is one) and Redis \`INFO commandstats\` (commands inside BullMQ's scripts included), less the idle processes' background over as long.`,
    '',
  ];
  for (const s of SCENARIOS) {
    const rs = rows.filter((r) => r.scenario.id === s.id);
    if (rs.length === 0) continue;
    const plan = s.levels.map((l) => `N=${l.n}: ${l.warmup} warm-up + ${l.rounds} recorded per user${l.staggerMs ? `, first requests spread over ${l.staggerMs} ms` : ''}`).join('; ');
    parts.push(`### \`${s.id}\`: ${s.title}`, '', `Requests: ${plan}.`, '', latencyTable(rs, s.tokensPerSecond > 0), '', resourceTable(rs), '');
  }
  parts.push(...resumeSection(resumes));
  parts.push('**Against the targets of issue 12** (same machine):', '', ...goalCheck(rows), ...resumeCheck(resumes), '', '<!-- bench:chat-overhead:end -->');
  return parts.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const started = performance.now();
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-bench-'));
  onCleanup('temp directory', async () => fs.rmSync(work, { recursive: true, force: true }));
  console.log(`bench: targets ${TARGETS.map((t) => t.id).join(', ')} (${RUNTIME})${QUICK ? ' (quick)' : ''}`);

  const versions = await backendVersions(POSTGRES_URL, REDIS_URL);
  const fakes = await startFakes(work);
  const agents = { direct: new http.Agent({ keepAlive: true, maxSockets: Infinity }), agentry: new http.Agent({ keepAlive: true, maxSockets: Infinity }) };
  onCleanup('http agents', async () => {
    agents.direct.destroy();
    agents.agentry.destroy();
  });

  const rows: Row[] = [];
  const resumes: ResumeResult[] = [];
  for (const t of TARGETS) {
    console.log(`\n== ${t.id}: starting`);
    const system = await startSystem(t, fakes, work);
    try {
      for (const s of RESUME_ONLY ? [] : SCENARIOS.filter((x) => !LEVELS || x.levels.some((l) => LEVELS.includes(`${x.id}:${l.n}`)))) {
        const ep = endpoints(s, fakes, system.port, agents);
        // Smoke test: one request each way must work before anything is measured.
        for (const [name, e] of [['direct', ep.direct], ['agentry', ep.agentry]] as const) {
          const smoke = await streamOnce(e, EXPECT);
          if (!smoke.ok) throw new Error(`${t.id}/${s.id}: the ${name} smoke request failed: ${smoke.error}`);
        }
        for (const plan of s.levels.filter((l) => !LEVELS || LEVELS.includes(`${s.id}:${l.n}`))) {
          const before = await waitForQuiet();
          const direct = await runLevel(ep.direct, plan);
          const agentry = await runLevel(ep.agentry, plan, () => startProbe(system.processes, fakes[s.provider]!.child));
          rows.push({ target: t, scenario: s, direct, agentry, before });
          const r = agentry.resources!;
          console.log(
            `${t.id.padEnd(14)} ${s.id.padEnd(6)} N=${String(plan.n).padEnd(4)} req ${String(agentry.requests).padStart(4)} err ${agentry.errors}` +
              ` | TTFT p50 ${fmt(agentry.ttft.p50)} p99 ${fmt(agentry.ttft.p99)} (direct ${fmt(direct.ttft.p50, 2)} / ${fmt(direct.ttft.p99, 2)})` +
              ` | gap p99 ${fmt(agentry.gap.p99)} (direct ${fmt(direct.gap.p99)}) | lost/dup/reord ${fid(agentry.fidelity)}` +
              ` | cpu agentry ${Math.round(r.cpu.agentry)}% other ${Math.round(r.cpu.other)}% box ${Math.round(r.box)}% (before ${Math.round(before)}%) | ${agentry.wallS.toFixed(1)} s`,
          );
          for (const e of [...agentry.errorSamples, ...direct.errorSamples.map((x) => `direct: ${x}`)]) console.log(`    error: ${e}`);
        }
      }
      const paced = SCENARIOS.find((x) => x.tokensPerSecond > 0)!;
      const pacedEp = endpoints(paced, fakes, system.port, agents).agentry;
      for (const delayMs of LEVELS ? [] : RESUME_DELAYS_MS) {
        await waitForQuiet();
        const r = await runResume(t, pacedEp, delayMs);
        resumes.push(r);
        console.log(
          `${t.id.padEnd(14)} resume after ${String(delayMs).padStart(3)} ms: ${r.streams} streams, err ${r.errors} | first resumed chunk p50 ${fmt(r.first.p50)} p95 ${fmt(r.first.p95)} max ${fmt(r.first.max)} ms | lost/dup/reord ${fid(r.fidelity)}`,
        );
        for (const e of r.errorSamples) console.log(`    error: ${e}`);
      }
      if (system.backends && !RESUME_ONLY && !LEVELS) {
        // The burst scenario's request, COST_RUNS times over 8 connections (bench/lib.ts measureRunCost).
        const ep = endpoints(SCENARIOS[0]!, fakes, system.port, agents).agentry;
        const send = async (runs: number) => {
          let left = runs;
          let ok = 0;
          await Promise.all(Array.from({ length: 8 }, async () => {
            while (left-- > 0) if ((await streamOnce(ep, EXPECT)).ok) ok++;
          }));
          return ok;
        };
        const cost = await measureRunCost({ send, runs: COST_RUNS, postgresUrl: POSTGRES_URL, ...system.backends });
        costs.set(t.id, cost);
        console.log(`${t.id}: per streamed run ${cost.xacts.toFixed(1)} Postgres transactions, ${cost.written.toFixed(1)} rows written, ${cost.redis.toFixed(1)} Redis commands (${cost.top})`);
      }
    } finally {
      console.log(`== ${t.id}: stopping`);
      await system.stop();
    }
  }

  const seconds = (performance.now() - started) / 1000;
  const body = section(rows, resumes, { date, seconds, pg: versions.pg, redis: versions.redis });
  if (RESUME_ONLY) {
    console.log(`\n${[...resumeSection(resumes), ...resumeCheck(resumes)].join('\n')}\n\n(the resume part only: not written; ${Math.round(seconds)} s)`);
  } else if (WRITE) {
    writeDocSection('chat-overhead', body);
    console.log(`\nwrote docs/benchmarks.md (${Math.round(seconds)} s)`);
  } else {
    console.log(`\n${body}\n\n(not written: --no-write; ${Math.round(seconds)} s)`);
  }
}

runBench(main, 25 * 60_000);
