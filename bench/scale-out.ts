/**
 * Issue 24, "Scale-out, measured and modelled": throughput, TTFT and CPU per process kind for
 * the process layouts 1 gateway + 1 agent-worker, 1 + 2 and 2 + 2 (behind libs/testing's
 * round-robin proxy, in a process of its own), all compiled, on the local Postgres (a throwaway
 * database each) and a redis-server of each layout's own, against one fake model process.
 *
 *   npm run bench:scale                          # every layout, three rounds; writes docs/benchmarks.md
 *   npm run bench:scale -- --quick --no-write    # one shorter round, no per-run backend counts, print only
 *   npm run bench:scale -- --rounds=3            # more rounds (each runs every layout once, in order)
 *   npm run bench:scale -- --layouts=1x1,2x2     # a subset (GxW: G gateways, W workers)
 *   npm run bench:scale -- --stream-rate=20      # the paced streams' rate (default: 30 % of the first layout's saturation)
 *
 * Per layout, back to back: (a) non-streamed runs/s at saturation, closed loop (C keep-alive
 * connections, each sending the next request when the last answered), warm-up then a measured
 * window; (b) TTFT p50/p99 of 50-token streams started open-loop at a fixed moderate rate, the
 * same rate for every layout; (c) CPU per process kind over the window of (a), from /proc, in ms
 * per run: gateways, workers, the proxy, the Postgres backends serving the layout's database
 * (found by their process titles), Postgres's shared background processes (walwriter,
 * checkpointer, ...; other users of the server count there too), the layout's redis-server, the
 * fake and the load generator (this process), plus the whole box's busy %. "other" is what the
 * box spent beyond all of them: other people's work on a shared machine. Full runs also count
 * Postgres transactions, rows written and Redis commands per run (bench/lib.ts measureRunCost).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fakeAnswer } from './fake-model.js';
import { freePort } from '@agentry/testing';
import { START_TIMEOUT_MS, agentryRequest, benchKeys, closedLoop, sendN, startCluster, type Cluster } from './cluster.js';
import { streamOnce, type Endpoint, type StreamExpectation } from './sse-client.js';
import {
  BENCH_POSTGRES_URL,
  BENCH_REDIS_URL,
  CLK_TCK,
  backendVersions,
  boxTicks,
  commandLine,
  cpuTicks,
  machineLine,
  measureRunCost,
  onCleanup,
  pct,
  postgresPids,
  runBench,
  sleep,
  sortNum,
  spawnEntry,
  waitForQuietBox,
  writeDocSection,
  type RunCost,
} from './lib.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
for (const a of argv) {
  if (!/^--(quick|no-write|rounds=[1-9]|layouts=\d+x\d+(,\d+x\d+)*|stream-rate=\d+|concurrency=\d+)$/.test(a)) {
    console.error(`unknown argument ${a}; use --quick --no-write --rounds=<1-9> --layouts=1x1,1x2,2x2 --stream-rate=<streams/s> --concurrency=<connections>`);
    process.exit(2);
  }
}
const QUICK = argv.includes('--quick');
const WRITE = !argv.includes('--no-write');
const LAYOUTS = (option('layouts') ?? '1x1,1x2,2x2').split(',').map((l) => {
  const [g, w] = l.split('x').map(Number) as [number, number];
  if (g < 1 || w < 1 || g > 4 || w > 4) {
    console.error(`layout ${l}: 1 to 4 gateways and 1 to 4 workers`);
    process.exit(2);
  }
  return { gateways: g, workers: w, id: `${g}+${w}` };
});
/** Saturates one gateway and one worker on this box (bench/throughput.ts: C=64 beat C=16). */
const CONNECTIONS = Number(option('concurrency') ?? 64);
/** Rounds of every layout in turn: a shared box drifts, and the ratios within one round are what compare. */
const ROUNDS = Number(option('rounds') ?? (QUICK ? 1 : 3));
const FIXED_STREAM_RATE = option('stream-rate') ? Number(option('stream-rate')) : undefined;

const TOKENS = 50;
const ANSWER = fakeAnswer(TOKENS);
const EXPECT: StreamExpectation = { tokens: TOKENS, text: ANSWER, timeoutMs: 30_000 };
const WARMUP_S = QUICK ? 2 : 4;
const MEASURE_S = QUICK ? 4 : 10;
const STREAM_WARMUP_S = QUICK ? 1 : 2;
const STREAM_S = QUICK ? 4 : 8;
/** Paced streams in flight at most: past this the layout is overloaded and the bench stops adding. */
const MAX_STREAMS_IN_FLIGHT = 256;
const COST_RUNS = 200;
/** Before each layout the bench waits (bounded) for the box to be this quiet, in % busy. */
const QUIET_BUSY_PCT = 50;
/** Others' CPU, in cores, above which a measured window counts as disturbed in the reading. */
const DISTURBED_CORES = 0.5;
const QUIET_WAIT_PER_LAYOUT_MS = 30_000;
let quietBudgetMs = 120_000;
const KEYS = benchKeys();

const answered = (status: number | undefined, body: string) => status === 200 && body.includes(ANSWER);

// ---------------------------------------------------------------------------------------------
// CPU per process kind

const KINDS = ['gateways', 'workers', 'proxy', 'pgBackends', 'pgShared', 'redis', 'fake', 'loadgen'] as const;
type Kind = (typeof KINDS)[number];
const KIND_LABEL: Record<Kind, string> = {
  gateways: 'gateway(s)',
  workers: 'worker(s)',
  proxy: 'proxy',
  pgBackends: 'Postgres backends',
  pgShared: 'Postgres shared',
  redis: 'Redis',
  fake: 'fake',
  loadgen: 'load generator',
};

interface CpuReading {
  /** CPU ms spent by each kind over the window. */
  ms: Record<Kind, number>;
  /** Whole machine busy over the window, % of all cores. */
  box: number;
  /** CPU ms the box spent beyond the kinds above (others' work on a shared machine). */
  otherMs: number;
  seconds: number;
}

/**
 * Starts counting CPU per kind. A Postgres backend that appears during the window (a pool
 * growing) counts with all its CPU, which it spent within the window.
 */
function cpuProbe(cluster: Cluster, fakePid: number): { stop(): CpuReading } {
  const t0 = performance.now();
  const pg0 = postgresPids(cluster.database);
  const fixed: Record<Exclude<Kind, 'pgBackends' | 'loadgen'>, number[]> = {
    gateways: cluster.gateways.map((c) => c.pid),
    workers: cluster.workers.map((c) => c.pid),
    proxy: cluster.proxy ? [cluster.proxy.pid] : [],
    pgShared: pg0.shared,
    redis: [cluster.redis.pid],
    fake: [fakePid],
  };
  const start = new Map<number, number>();
  for (const pid of [...Object.values(fixed).flat(), ...pg0.backends]) start.set(pid, cpuTicks(pid));
  const loadgen0 = process.cpuUsage();
  const box0 = boxTicks();
  return {
    stop() {
      const seconds = (performance.now() - t0) / 1000;
      const box1 = boxTicks();
      const lg = process.cpuUsage(loadgen0);
      const ticksMs = (pids: number[]) => (pids.reduce((s, pid) => s + Math.max(0, cpuTicks(pid) - (start.get(pid) ?? 0)), 0) * 1000) / CLK_TCK;
      const backends = [...new Set([...pg0.backends, ...postgresPids(cluster.database).backends])];
      const ms = {
        gateways: ticksMs(fixed.gateways),
        workers: ticksMs(fixed.workers),
        proxy: ticksMs(fixed.proxy),
        pgBackends: ticksMs(backends),
        pgShared: ticksMs(fixed.pgShared),
        redis: ticksMs(fixed.redis),
        fake: ticksMs(fixed.fake),
        loadgen: (lg.user + lg.system) / 1000,
      } satisfies Record<Kind, number>;
      const busyMs = ((box1.busy - box0.busy) * 1000) / CLK_TCK;
      const named = KINDS.reduce((s, k) => s + ms[k], 0);
      return { ms, box: (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total), otherMs: Math.max(0, busyMs - named), seconds };
    },
  };
}

/** The box's busy % over `ms` (nothing of the bench's running). */
async function boxBusy(ms: number): Promise<number> {
  const a = boxTicks();
  await sleep(ms);
  const b = boxTicks();
  return (100 * (b.busy - a.busy)) / Math.max(1, b.total - a.total);
}

// ---------------------------------------------------------------------------------------------
// Paced streams

interface StreamResult {
  rate: number;
  started: number;
  requests: number;
  errors: number;
  errorSample?: string;
  /** Streams not started because MAX_STREAMS_IN_FLIGHT were open. */
  shed: number;
  p50: number;
  p99: number;
  box: number;
}

/** Starts `rate` streams a second for the warm-up and then the measured window; TTFT of the measured ones. */
async function pacedStreams(port: number, rate: number): Promise<StreamResult> {
  const spec = agentryRequest(port, KEYS, true);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const ep: Endpoint = { ...spec, agent };
  const ttfts: number[] = [];
  let errors = 0;
  let errorSample: string | undefined;
  let inFlight = 0;
  let started = 0;
  let shed = 0;
  let requests = 0;
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  const warmEnd = t0 + STREAM_WARMUP_S * 1000;
  const end = warmEnd + STREAM_S * 1000;
  let box0 = boxTicks();
  let boxTaken = false;
  // Open loop: stream i starts at t0 + i/rate whatever the earlier ones are doing.
  for (let i = 0; ; i++) {
    const at = t0 + (i * 1000) / rate;
    if (at >= end) break;
    const wait = at - performance.now();
    if (wait > 0) await sleep(wait);
    if (!boxTaken && at >= warmEnd) {
      box0 = boxTicks();
      boxTaken = true;
    }
    if (inFlight >= MAX_STREAMS_IN_FLIGHT) {
      shed++;
      continue;
    }
    const measured = at >= warmEnd;
    inFlight++;
    started++;
    pending.push(
      streamOnce(ep, EXPECT).then((s) => {
        inFlight--;
        if (!measured) return;
        requests++;
        if (s.ok) ttfts.push(s.ttftMs);
        else {
          errors++;
          errorSample ??= s.error;
        }
      }),
    );
  }
  const box1 = boxTicks();
  await Promise.all(pending);
  agent.destroy();
  const sorted = sortNum(ttfts);
  return {
    rate,
    started,
    requests,
    errors,
    ...(errorSample ? { errorSample } : {}),
    shed,
    p50: pct(sorted, 50),
    p99: pct(sorted, 99),
    box: (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total),
  };
}

// ---------------------------------------------------------------------------------------------
// Main

interface LayoutResult {
  id: string;
  round: number;
  gateways: number;
  workers: number;
  /** Box busy % over the half second before the layout started (after a bounded wait for quiet; nothing of the bench's running but the idle fake). */
  before: number;
  rps: number;
  requests: number;
  errors: number;
  errorSample?: string;
  p50: number;
  p99: number;
  cpu: CpuReading;
  streams: StreamResult;
  cost?: RunCost;
}

const f0 = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a');
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');

/** CPU ms per run of the kinds Agentry's deployment runs (gateways, workers, Postgres, Redis). */
function deploymentMsPerRun(r: LayoutResult): number {
  const m = r.cpu.ms;
  return (m.gateways + m.workers + m.pgBackends + m.pgShared + m.redis) / r.requests;
}

async function main(): Promise<number> {
  const started = Date.now();
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const cores = os.availableParallelism();
  const idleBefore = await boxBusy(5_000);
  const loadBefore = os.loadavg();
  console.log(`box busy before starting: ${f0(idleBefore)} % of ${cores} cores over 5 s (load average ${loadBefore.map((l) => l.toFixed(1)).join(' ')})`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-scale-'));
  onCleanup('work directory', async () => fs.rmSync(work, { recursive: true, force: true }));
  const versions = await backendVersions(BENCH_POSTGRES_URL, BENCH_REDIS_URL);
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, START_TIMEOUT_MS);

  // Every layout once per round, in order: the drift of a shared box over the run shows between rounds.
  const plan = Array.from({ length: ROUNDS }, (_, i) => LAYOUTS.map((l) => ({ ...l, round: i + 1 }))).flat();
  const results: LayoutResult[] = [];
  let streamRate = FIXED_STREAM_RATE;
  for (const layout of plan) {
    // A shared box: give others' bursts a bounded chance to pass, so that layouts meet similar weather.
    const quiet = await waitForQuietBox(QUIET_BUSY_PCT, Math.min(QUIET_WAIT_PER_LAYOUT_MS, quietBudgetMs));
    quietBudgetMs = Math.max(0, quietBudgetMs - quiet.waitedMs);
    const before = quiet.busy;
    console.log(`\n== ${layout.id}, round ${layout.round}: starting (box busy ${f0(before)} %)`);
    const cluster = await startCluster({ gateways: layout.gateways, workers: layout.workers, fakePort, keys: KEYS, work, name: `g${layout.gateways}w${layout.workers}`, runtime: 'node' });
    try {
      const spec = agentryRequest(cluster.port, KEYS);
      const load = await closedLoop(spec, CONNECTIONS, { warmupS: WARMUP_S, measureS: MEASURE_S, ok: answered, probe: () => cpuProbe(cluster, fake.pid) });
      const cpu = load.probe;
      const perRun = (ms: number) => ms / Math.max(1, load.requests);
      console.log(
        `${layout.id}: ${f0(load.rps)} runs/s non-streamed (C=${CONNECTIONS}, ${load.errors} errors${load.errorSample ? `: ${load.errorSample}` : ''}), p50 ${f1(load.p50)} ms, p99 ${f1(load.p99)} ms, box ${f0(cpu.box)} %\n` +
          `   CPU ms per run: ${KINDS.map((k) => `${KIND_LABEL[k]} ${f2(perRun(cpu.ms[k]))}`).join(', ')}, other ${f2(perRun(cpu.otherMs))}`,
      );
      streamRate ??= Math.max(5, Math.round(0.3 * load.rps));
      const streams = await pacedStreams(cluster.port, streamRate);
      console.log(
        `${layout.id}: streams at ${streamRate}/s: TTFT p50 ${f1(streams.p50)} ms, p99 ${f1(streams.p99)} ms over ${streams.requests} (${streams.errors} errors${streams.errorSample ? `: ${streams.errorSample}` : ''}, ${streams.shed} shed), box ${f0(streams.box)} %`,
      );
      let cost: RunCost | undefined;
      // What a run costs the backends does not depend on the box's load: counted in the first round only.
      if (!QUICK && layout.round === 1) {
        cost = await measureRunCost({ send: (n) => sendN(spec, n, 8, answered), runs: COST_RUNS, postgresUrl: BENCH_POSTGRES_URL, database: cluster.database, redisUrl: cluster.redis.url });
        console.log(`${layout.id}: per run ${f1(cost.xacts)} Postgres transactions, ${f1(cost.written)} rows written, ${f1(cost.redis)} Redis commands (${cost.top})`);
      }
      results.push({
        id: layout.id,
        round: layout.round,
        gateways: layout.gateways,
        workers: layout.workers,
        before,
        rps: load.rps,
        requests: load.requests,
        errors: load.errors,
        ...(load.errorSample ? { errorSample: load.errorSample } : {}),
        p50: load.p50,
        p99: load.p99,
        cpu,
        streams,
        ...(cost ? { cost } : {}),
      });
    } finally {
      await cluster.stop();
    }
  }

  const body = section(results, { date, seconds: Math.round((Date.now() - started) / 1000), cores, idleBefore, loadBefore, versions, streamRate: streamRate ?? 0 });
  console.log(`\n${body}`);
  if (WRITE) writeDocSection('scale-out', body);
  const failed = results.filter((r) => r.errors > 0 || r.streams.errors > 0);
  if (failed.length > 0) console.error(`errors in ${failed.map((r) => r.id).join(', ')}: see the table`);
  return failed.length > 0 ? 1 : 0;
}

const median = (xs: number[]) => {
  const s = sortNum(xs.filter((x) => Number.isFinite(x)));
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** The reading under the table: ratios within each round, where the box saturates, what a run costs in CPU. */
function reading(results: LayoutResult[], cores: number): string[] {
  const ids = [...new Set(results.map((r) => r.id))];
  const base = ids[0]!;
  const rounds = [...new Set(results.map((r) => r.round))];
  const all = (id: string) => results.filter((r) => r.id === id);
  const ratioIn = (round: number, id: string) => {
    const b = results.find((r) => r.round === round && r.id === base);
    const x = results.find((r) => r.round === round && r.id === id);
    return b && x ? x.rps / b.rps : NaN;
  };
  const others = (r: LayoutResult) => r.cpu.otherMs / 1000 / r.cpu.seconds;
  /** A window in which others' work took more than half a core: its rate says more about them than about the layout. */
  const disturbed = (r: LayoutResult | undefined) => !r || others(r) > DISTURBED_CORES;
  const clean = (n: number, id: string) => !disturbed(results.find((r) => r.round === n && r.id === base)) && !disturbed(results.find((r) => r.round === n && r.id === id));
  /** A layout's windows for per-run CPU: the undisturbed ones when there are any (contention inflates CPU per run too). */
  const of = (id: string) => (all(id).some((r) => !disturbed(r)) ? all(id).filter((r) => !disturbed(r)) : all(id));
  const cleanRounds = (id: string) => rounds.filter((n) => clean(n, id));
  const medRatio = (id: string) => median((cleanRounds(id).length > 0 ? cleanRounds(id) : rounds).map((n) => ratioIn(n, id)));
  const msPerRun = (id: string) => median(of(id).map(deploymentMsPerRun));
  const kindPerRun = (id: string, k: Kind) => median(of(id).map((r) => r.cpu.ms[k] / Math.max(1, r.requests)));
  const boxes = results.map((r) => r.cpu.box);
  const named = (r: LayoutResult) => KINDS.reduce((sum, k) => sum + r.cpu.ms[k], 0) / 1000 / r.cpu.seconds;
  const baseMs = msPerRun(base);
  const more = ids.slice(1).map((id) => ({ id, ms: msPerRun(id), ratio: medRatio(id) }));
  const costlier = more.filter((m) => m.ms > baseMs * 1.1);
  const gw = kindPerRun(base, 'gateways');
  const wk = kindPerRun(base, 'workers');
  const pgB = kindPerRun(base, 'pgBackends');
  const rd = kindPerRun(base, 'redis');
  const ttft = ids.map((id) => `${id} ${f1(median(of(id).map((r) => r.streams.p50)))} / ${f1(median(of(id).map((r) => r.streams.p99)))} ms`);
  return [
    `**Reading.** Runs/s against ${base} of the same round: ${rounds
      .map((n) => `round ${n}: ${ids.slice(1).map((id) => `${id} ${f2(ratioIn(n, id))}x${clean(n, id) ? '' : ' (disturbed)'}`).join(', ')}`)
      .join('; ')}${rounds.length > 1 ? `; median over the rounds where neither window was disturbed (others took under ${DISTURBED_CORES} core), or over all when none was clean: ${more.map((m) => `${m.id} ${f2(m.ratio)}x (${cleanRounds(m.id).length > 0 ? `${cleanRounds(m.id).length} clean` : 'none clean'})`).join(', ')}` : ''}. ` +
      `The box was ${f0(Math.min(...boxes))}-${f0(Math.max(...boxes))} % busy in every saturation window, i.e. all ${cores} cores (${cores * 1000} CPU ms a second) were in use: ` +
      `the bench's processes took ${f2(Math.min(...results.map(named)))}-${f2(Math.max(...results.map(named)))} cores and others' work ${f2(Math.min(...results.map(others)))}-${f2(Math.max(...results.map(others)))}. ` +
      `Once the cores are full, another gateway or worker process cannot add throughput; it can only take CPU from the processes already there. ` +
      `Per run, ${base}'s deployment processes (gateway, worker, Postgres backends and shared processes, Redis) spent ${f1(baseMs)} CPU ms (median of its undisturbed windows, or of all when none was): ` +
      `gateway ${f2(gw)}, worker ${f2(wk)}, Postgres backends ${f2(pgB)}, Redis ${f2(rd)}; ` +
      `so this box, with nothing else on it, tops out near ${f0((cores * 1000) / baseMs)} runs/s whatever the layout, and less with the load generator and the fake on the same cores. ` +
      (costlier.length > 0
        ? `More processes cost more CPU per run (${more.map((m) => `${m.id} ${f1(m.ms)} ms`).join(', ')}): more event loops share two cores, each wakes for fewer requests (less batching per wake-up, more context switches), every process keeps its own pools, timers and BullMQ polling, and 2 gateways add the proxy's hop${results.some((r) => r.gateways > 1) ? ` (${f2(median(results.filter((r) => r.gateways > 1).map((r) => r.cpu.ms.proxy / Math.max(1, r.requests))))} ms per run)` : ''}. `
        : `More processes did not cost measurably more CPU per run (${more.map((m) => `${m.id} ${f1(m.ms)} ms`).join(', ')}). `) +
      `TTFT p50 / p99 at ${f0(results[0]!.streams.rate)} streams/s (medians over the same windows): ${ttft.join(', ')}. ` +
      `On separate machines the per-run CPU above is what matters: one core runs a gateway at about ${f0(1000 / gw)} runs/s and a worker at about ${f0(1000 / wk)} runs/s (figures from ${base}, loaded box); see the model below.`,
  ];
}

function section(results: LayoutResult[], meta: { date: string; seconds: number; cores: number; idleBefore: number; loadBefore: number[]; versions: { pg: string; redis: string }; streamRate: number }): string {
  const per = (r: LayoutResult, ms: number) => f2(ms / Math.max(1, r.requests));
  const rounds = new Set(results.map((r) => r.round)).size;
  const rows = results.map((r) => {
    const m = r.cpu.ms;
    const cores = (ms: number) => f2(ms / 1000 / r.cpu.seconds);
    return (
      `| ${r.id}${rounds > 1 ? ` (round ${r.round})` : ''} | ${f0(r.rps)} (${r.errors}) | ${f0(r.p50)} / ${f0(r.p99)} | ${f1(r.streams.p50)} / ${f1(r.streams.p99)} (${r.streams.errors}${r.streams.shed ? `, ${r.streams.shed} shed` : ''}) |` +
      ` ${per(r, m.gateways)} | ${per(r, m.workers)} | ${r.gateways > 1 ? per(r, m.proxy) : '-'} | ${per(r, m.pgBackends)} | ${per(r, m.pgShared)} | ${per(r, m.redis)} | ${per(r, m.fake)} | ${per(r, m.loadgen)} | ${per(r, r.cpu.otherMs)} |` +
      ` ${cores(KINDS.reduce((s, k) => s + m[k], 0))} / ${cores(r.cpu.otherMs)} | ${f0(r.cpu.box)} (${f0(r.before)}) |` +
      ` ${r.cost ? `${f1(r.cost.xacts)} / ${f1(r.cost.written)} / ${f1(r.cost.redis)}` : '-'} |`
    );
  });
  const costs = results.filter((r) => r.cost);
  return [
    '<!-- bench:scale-out:start -->',
    '## Scale-out on one box: 1 gateway + 1 worker, 1 + 2, 2 + 2',
    '',
    `Run ${meta.date} with \`${commandLine('bench:scale')}\` (bench/scale-out.ts; ${meta.seconds} s). Machine: ${machineLine()}. Postgres ${meta.versions.pg}, Redis ${meta.versions.redis}, on 127.0.0.1. Written by the script; re-running replaces it.`,
    '',
    `**The box was shared.** Other agents ran builds and tests on it throughout: before the run it was ${f0(meta.idleBefore)} % busy over 5 s with nothing of the bench running (load average ${meta.loadBefore.map((l) => l.toFixed(1)).join(', ')} on ${meta.cores} cores), and before each layout the bench waited up to ${QUIET_WAIT_PER_LAYOUT_MS / 1000} s (120 s in all) for the box to fall under ${QUIET_BUSY_PCT} % busy (the "before" figure is its busy % when the layout started), and the "other" columns are what it spent beyond the bench's processes during each window. Absolute rates are therefore low and noisy; compare layouts within one round (measured back to back) and trust the per-run CPU and counted columns over the timed ones.`,
    '',
    `**Method.** ${rounds} round${rounds > 1 ? 's' : ''}, each running every layout once, in order. Each layout runs compiled (\`node dist\`, as \`npm run start:*\`) on a throwaway database of the local Postgres (synchronous_commit on) and a redis-server of its own (no persistence); gateways, workers, the proxy (2 gateways only: libs/testing's round-robin proxy as its own process, bench/rr-proxy.ts) and the fake (bench/fake-model.ts, no delay, a ${TOKENS}-word answer) are separate processes; this process is the load generator. (a) Non-streamed: ${CONNECTIONS} keep-alive connections in a closed loop, ${WARMUP_S} s warm-up then ${MEASURE_S} s measured; an error is a non-200 or a body without the fake's text. (b) Streams: ${meta.streamRate} streams/s started open-loop (${FIXED_STREAM_RATE === undefined ? "30 % of the first layout's saturation, " : ''}the same for every layout; at most ${MAX_STREAMS_IN_FLIGHT} in flight), ${STREAM_WARMUP_S} s warm-up then ${STREAM_S} s measured; TTFT = request start to the first content token. (c) CPU per process kind over the window of (a), from /proc/<pid>/stat, divided by the runs answered in it: Postgres backends = those whose process title names the layout's database; Postgres shared = the server's own processes (walwriter, checkpointer, ...), which serve every database on it; other = the box's busy CPU beyond every named process (others' work). Cores = CPU of the named processes / of others, in cores. Per run${costs.length > 0 ? ` (round 1)` : ' (full runs only)'}: ${COST_RUNS} more requests between 11 s idle windows, \`pg_stat_database\` and \`INFO commandstats\` deltas less the idle background (bench/lib.ts measureRunCost).`,
    '',
    '| layout (gateways + workers) | runs/s non-streamed (errors) | latency p50 / p99 ms | TTFT p50 / p99 ms at the paced rate (errors) | CPU ms per run: gateway(s) | worker(s) | proxy | Postgres backends | Postgres shared | Redis | fake | load generator | other | cores: named / other | box busy % (before) | per run: Postgres transactions / rows written / Redis commands |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
    ...(costs.length > 0 ? [`Most frequent Redis commands per run (${costs[0]!.id}): ${costs[0]!.cost!.top}.`, ''] : []),
    ...reading(results, meta.cores),
    '<!-- bench:scale-out:end -->',
  ].join('\n');
}

runBench(main, 25 * 60_000);
