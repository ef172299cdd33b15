/**
 * Issue 12, item 2: non-streaming requests per second at saturation, through the full path, with
 * a zero-latency fake model; the same load against the fake alone and through Portkey's
 * open-source gateway (`@portkey-ai/gateway` from npm, on loopback, non-streaming: its streaming
 * path fails on Node 20, see shared/reference/ecosystem-trials.md section 10), in the same run,
 * reported as ratios to the fake alone.
 *
 *   npm run bench:throughput                        # writes docs/benchmarks.md
 *   npm run bench:throughput -- --quick --no-write  # shorter, print only
 *   npm run bench:throughput -- --runtime=tsx       # Agentry from its sources under tsx (the default is compiled, as every start path runs it)
 *
 * Targets, one at a time, each on its own processes: `fake` (bench/fake-model.ts alone), `portkey`
 * (Portkey -> fake), `agentry-cluster` (gateway + one agent-worker on the local Postgres and Redis
 * -> fake) and `agentry-embedded` (the standalone on PGlite -> fake). The fake alone runs first
 * and again last, so drift on the shared box shows. Load: C keep-alive connections, each sending
 * the next request when the last answered (closed loop), for a fixed time after a warm-up; the
 * highest rate over the concurrency levels is the target's saturation rate. An error is a
 * non-200 or a body without the fake's text. Everything on 127.0.0.1.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fakeAnswer } from './fake-model.js';
import { freePort } from '@agentry/testing';
import { START_TIMEOUT_MS, agentryRequest, benchKeys, closedLoop, createBenchAgent, sendN, startCluster, writeBenchConfig, type RequestSpec } from './cluster.js';
import {
  BENCH_POSTGRES_URL,
  BENCH_REDIS_URL,
  backendPids,
  backendVersions,
  boxTicks,
  commandLine,
  cpuMeter,
  machineLine,
  measureRunCost,
  onCleanup,
  rssMb,
  runBench,
  spawnEntry,
  waitForHttp,
  writeDocSection,
  type Child,
  type RunCost,
} from './lib.js';

const argv = process.argv.slice(2);
for (const a of argv) {
  if (!/^--(quick|no-write|runtime=(tsx|node))$/.test(a)) {
    console.error(`unknown argument ${a}; use --quick --no-write --runtime=tsx|node`);
    process.exit(2);
  }
}
const QUICK = argv.includes('--quick');
const WRITE = !argv.includes('--no-write');
const RUNTIME = argv.includes('--runtime=tsx') ? 'tsx' : 'node';
const POSTGRES_URL = BENCH_POSTGRES_URL;

const TOKENS = 50;
const ANSWER = fakeAnswer(TOKENS);
const LEVELS = QUICK ? [32] : [16, 64];
const WARMUP_S = QUICK ? 2 : 3;
const MEASURE_S = QUICK ? 4 : 10;
const KEYS = benchKeys();
const PROVIDER_KEY = KEYS.provider;
/** An answer is good when it is a 200 carrying the fake's whole text. */
const answered = (status: number | undefined, body: string) => status === 200 && body.includes(ANSWER);

interface Target {
  id: string;
  describe: string;
  /** Starts the target's processes; resolves with the request to send and the processes to measure. */
  start(fakePort: number, work: string): Promise<{ request: RequestSpec; processes: Child[]; stop(): Promise<void>; backends?: { database: string; redisUrl: string } }>;
}

interface Level {
  connections: number;
  requests: number;
  errors: number;
  errorSample?: string;
  rps: number;
  p50: number;
  p99: number;
  /** CPU of the target's processes (fake excluded) in % of one core. */
  cpu: number;
  /** CPU of the fake in % of one core. */
  fakeCpu: number;
  /** CPU of every Postgres and Redis process on the machine, in % of one core. */
  backendCpu: number;
  box: number;
  rss: Record<string, number>;
}

// ---------------------------------------------------------------------------------------------
// Load

async function runLevel(spec: RequestSpec, connections: number, measured: Child[], fake: Child): Promise<Level> {
  const probe = () => {
    const cpu = cpuMeter(measured.map((c) => c.pid));
    const fakeCpu = cpuMeter([fake.pid]);
    const backendCpu = cpuMeter(backendPids());
    const box0 = boxTicks();
    const peak: Record<string, number> = {};
    const sample = () => {
      for (const c of measured) peak[c.name] = Math.max(peak[c.name] ?? 0, rssMb(c.pid));
    };
    const sampler = setInterval(sample, 500);
    return {
      stop() {
        clearInterval(sampler);
        sample();
        const box1 = boxTicks();
        return {
          cpu: cpu.stop(),
          fakeCpu: fakeCpu.stop(),
          backendCpu: backendCpu.stop(),
          box: (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total),
          rss: peak,
        };
      },
    };
  };
  const r = await closedLoop(spec, connections, { warmupS: WARMUP_S, measureS: MEASURE_S, ok: answered, probe });
  return {
    connections,
    requests: r.requests,
    errors: r.errors,
    ...(r.errorSample ? { errorSample: r.errorSample } : {}),
    rps: r.rps,
    p50: r.p50,
    p99: r.p99,
    ...r.probe,
  };
}

/** Runs whose backend cost is counted, per Agentry target with its own database and Redis. */
const COST_RUNS = 200;

// ---------------------------------------------------------------------------------------------
// Targets

const fakeBody = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream: false });

const TARGETS: Target[] = [
  {
    id: 'fake',
    describe: 'bench/fake-model.ts alone (no gateway)',
    async start(fakePort) {
      return {
        request: { port: fakePort, path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER_KEY}` }, body: fakeBody },
        processes: [],
        stop: async () => {},
      };
    },
  },
  {
    id: 'portkey',
    describe: '`@portkey-ai/gateway` 1.15.2 (`build/start-server.js --headless`, plain node, listen pinned to 127.0.0.1) -> fake, headers `x-portkey-provider: openai`, `x-portkey-custom-host`',
    async start(fakePort, work) {
      const port = await freePort();
      const preload = path.join(work, 'loopback.mjs');
      // Portkey listens on every interface and has no host flag: pin listen() to loopback.
      fs.writeFileSync(
        preload,
        [
          "import net from 'node:net';",
          'const listen = net.Server.prototype.listen;',
          'net.Server.prototype.listen = function (...args) {',
          "  if (typeof args[0] === 'object' && args[0] !== null) args[0] = { ...args[0], host: '127.0.0.1' };",
          "  else if (typeof args[0] === 'number') args.splice(1, typeof args[1] === 'string' ? 1 : 0, '127.0.0.1');",
          '  return listen.apply(this, args);',
          '};',
          '',
        ].join('\n'),
      );
      const child = spawnEntry('portkey', 'node_modules/@portkey-ai/gateway/build/start-server.js', {
        runtime: 'node',
        nodeArgs: ['--import', preload],
        args: [`--port=${port}`, '--headless'],
        cwd: work,
      });
      await waitForHttp(`http://127.0.0.1:${port}/`, START_TIMEOUT_MS, child);
      return {
        request: {
          port,
          path: '/v1/chat/completions',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${PROVIDER_KEY}`,
            'x-portkey-provider': 'openai',
            'x-portkey-custom-host': `http://127.0.0.1:${fakePort}/v1`,
          },
          body: fakeBody,
        },
        processes: [child],
        stop: () => child.stop(),
      };
    },
  },
  {
    id: 'agentry-cluster',
    describe: `gateway + one agent-worker (${RUNTIME === 'node' ? 'compiled, `node dist`, as `npm run start:*`' : 'under tsx'}), Postgres and Redis on 127.0.0.1 -> fake`,
    async start(fakePort, work) {
      const c = await startCluster({ gateways: 1, workers: 1, fakePort, keys: KEYS, work, name: 'cluster', runtime: RUNTIME });
      return { request: agentryRequest(c.port, KEYS), processes: [...c.gateways, ...c.workers], stop: c.stop, backends: { database: c.database, redisUrl: c.redis.url } };
    },
  },
  {
    id: 'agentry-embedded',
    describe: `the standalone (${RUNTIME === 'node' ? 'compiled, as `npm start`' : 'under tsx'}): one process, PGlite, in-process bus -> fake`,
    async start(fakePort, work) {
      const dir = fs.mkdtempSync(path.join(work, 'embedded-'));
      const config = writeBenchConfig(dir, fakePort, KEYS);
      const port = await freePort();
      const child = spawnEntry('standalone', 'services/standalone/src/main.ts', {
        args: ['--config', config],
        env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: randomBytes(32).toString('base64') },
        cwd: dir,
        runtime: RUNTIME,
      });
      try {
        await waitForHttp(`http://127.0.0.1:${port}/ready`, START_TIMEOUT_MS, child);
        await createBenchAgent(port);
      } catch (err) {
        await child.stop();
        throw err;
      }
      return { request: agentryRequest(port, KEYS), processes: [child], stop: () => child.stop() };
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Main

interface Result {
  target: Target;
  label: string;
  levels: Level[];
  best: Level;
  cost?: RunCost;
}

async function main(): Promise<number> {
  const started = Date.now();
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-throughput-'));
  onCleanup('work directory', async () => fs.rmSync(work, { recursive: true, force: true }));
  const versions = await backendVersions(POSTGRES_URL, BENCH_REDIS_URL);
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, START_TIMEOUT_MS);

  const results: Result[] = [];
  const order = [...TARGETS, TARGETS[0]!];
  for (const [i, target] of order.entries()) {
    const label = i === order.length - 1 ? `${target.id} (again)` : target.id;
    console.log(`\n== ${label}: starting`);
    const sys = await target.start(fakePort, work);
    const levels: Level[] = [];
    let cost: RunCost | undefined;
    try {
      for (const c of LEVELS) {
        const level = await runLevel(sys.request, c, sys.processes, fake);
        levels.push(level);
        console.log(
          `${label.padEnd(18)} C=${String(c).padEnd(4)} ${Math.round(level.rps)} req/s, ${level.errors} errors, p50 ${level.p50.toFixed(2)} ms, p99 ${level.p99.toFixed(2)} ms, ` +
            `cpu ${Math.round(level.cpu)}% fake ${Math.round(level.fakeCpu)}% box ${Math.round(level.box)}%${level.errorSample ? ` (${level.errorSample})` : ''}`,
        );
      }
      if (sys.backends) {
        const { database, redisUrl } = sys.backends;
        cost = await measureRunCost({ send: (n) => sendN(sys.request, n, 8, answered), runs: COST_RUNS, postgresUrl: POSTGRES_URL, database, redisUrl });
        console.log(`${label}: per run ${cost.xacts.toFixed(1)} Postgres transactions, ${cost.written.toFixed(1)} rows written, ${cost.redis.toFixed(1)} Redis commands (${cost.top})`);
      }
    } finally {
      await sys.stop();
    }
    const best = levels.reduce((a, b) => (b.rps > a.rps ? b : a));
    results.push({ target, label, levels, best, ...(cost ? { cost } : {}) });
  }

  const fakeRps = Math.max(...results.filter((r) => r.target.id === 'fake').map((r) => r.best.rps));
  const rows = results.flatMap((r) =>
    r.levels.map((l) => {
      const rss = Object.entries(l.rss)
        .map(([n, mb]) => `${n} ${Math.round(mb)}`)
        .join(', ');
      const perReq = l.rps > 0 ? ((l.cpu / 100) * 1000) / l.rps : NaN;
      const backendPerReq = l.rps > 0 ? ((l.backendCpu / 100) * 1000) / l.rps : NaN;
      return (
        `| ${r.label} | ${l.connections} | ${l.requests} (${l.errors}) | ${Math.round(l.rps).toLocaleString('en-US')} | ${l.p50.toFixed(2)} / ${l.p99.toFixed(2)} | ${l === r.best ? `**${(r.best.rps / fakeRps).toFixed(3)}**` : ''} |` +
        ` ${r.target.id === 'fake' ? '-' : `${Math.round(l.cpu)} (${Number.isNaN(perReq) ? 'n/a' : perReq.toFixed(2)})`} | ${Math.round(l.fakeCpu)} | ${Math.round(l.backendCpu)} (${Number.isNaN(backendPerReq) ? 'n/a' : backendPerReq.toFixed(2)})` +
        ` | ${r.cost ? `${r.cost.xacts.toFixed(1)} / ${r.cost.written.toFixed(1)} / ${r.cost.redis.toFixed(1)}` : '-'} | ${Math.round(l.box)} | ${rss || '-'} |`
      );
    }),
  );
  const agentryBest = Math.max(...results.filter((r) => r.target.id.startsWith('agentry-cluster')).map((r) => r.best.rps));
  const portkeyBest = Math.max(...results.filter((r) => r.target.id === 'portkey').map((r) => r.best.rps));
  const body = [
    '<!-- bench:throughput:start -->',
    '## Non-streaming throughput at saturation: Agentry, Portkey and the fake alone',
    '',
    `Run ${date} with \`${commandLine('bench:throughput')}\` (bench/throughput.ts; ${Math.round((Date.now() - started) / 1000)} s). Machine: ${machineLine()}. Postgres ${versions.pg}, Redis ${versions.redis}, on 127.0.0.1. Written by the script; re-running replaces it.`,
    '',
    `**Method.** The fake (\`bench/fake-model.ts\`, no delay, a ${TOKENS}-word answer) runs in its own process and serves every target. Targets: ${TARGETS.map((t) => `\`${t.id}\`: ${t.describe}`).join('; ')}. The fake alone is measured first and again last. Load: the bench process, C keep-alive connections in a closed loop, ${WARMUP_S} s warm-up then ${MEASURE_S} s measured, \`stream: false\`; an error is a non-200 or a body without the fake's text. Ratio = the target's best req/s over the fake alone's best. CPU in % of one core (the box has ${os.availableParallelism()}; the load generator and the fake share them), with CPU ms per request in brackets; Postgres+Redis counts every such process on the machine, whoever it serves; box = the whole machine busy %. RSS is the peak of each measured process. Per run (cluster only: its own database and a Redis server of the bench's own): after the levels, ${COST_RUNS} more requests between idle windows of 11 s (Postgres reports a backend's counters when idle), from \`pg_stat_database\` (transactions: a statement outside BEGIN..COMMIT is one) and Redis \`INFO commandstats\` (commands inside BullMQ's scripts included), less the idle processes' background over as long. Budget reached (issue 24): see docs/benchmarks.md.`,
    '',
    '| target | C | requests (errors) | req/s | latency p50 / p99 ms | ratio to the fake alone | target CPU % (ms per request) | fake CPU % | Postgres+Redis CPU % (ms per request) | per run: Postgres transactions / rows written / Redis commands | box busy % | peak RSS MB |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...rows,
    '',
    `**Against the target** (full path >= 50 % of the fake alone): Agentry cluster ${(agentryBest / fakeRps).toFixed(3)} of the fake alone (${agentryBest >= 0.5 * fakeRps ? 'meets' : 'misses'} it); Portkey, a proxy with no queue, no database and no run record, ${(portkeyBest / fakeRps).toFixed(3)}.`,
    '<!-- bench:throughput:end -->',
  ].join('\n');
  console.log(`\n${body}`);
  if (WRITE) writeDocSection('throughput', body);
  return 0;
}

runBench(main, 20 * 60_000);
