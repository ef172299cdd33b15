/**
 * Issue 24: one change measured against the commit before it, in one run, alternating the two
 * so that a shared box's drift falls on both alike. Both run as a cluster (gateway + one
 * agent-worker, compiled) on the local Postgres (a database each) and a Redis of the bench's
 * own (so that `INFO commandstats` counts only them), against one zero-latency fake model.
 *
 *   npm run bench:ab -- --base=<commit> [--head=<commit>] [--rounds=3] [--seconds=6] [--base-runtime=tsx] [--mode=cluster|embedded|both] [--log-level=warn|info]
 *
 * `--head` (default: this working tree) takes a commit too, so that work can go on meanwhile.
 * `--log-level=info` (default warn): both sides log a line per request, as a default install does.
 * `--base-runtime=tsx` runs the base from its sources under tsx (how `npm run start:*` ran them
 * before issue 24), the head always compiled.
 * Per round and side: non-streamed closed loop (C=16), 50-token streams closed loop (C=16),
 * one stream at a time (TTFT); Agentry CPU (gateway + worker, from /proc) per request. Then,
 * once per side, the backends' cost of a run: Postgres transactions and rows written
 * (`pg_stat_database` deltas of its own database) and Redis commands (`INFO commandstats`),
 * over 200 runs after idle windows that let Postgres report its counters, less what the idle
 * processes send meanwhile. Prints a table; compare the two columns only (absolute numbers move
 * with whatever else the box runs).
 *
 * `--mode=embedded` (issue 39) runs the same alternating rounds on the standalone instead (one
 * process: PGlite, the in-process bus), compiled and started with the node flags of each side's own
 * `npm start` (its package.json), a new data directory each; CPU is that one process's. No backend
 * counts there (PGlite is inside the process). `--mode=both`: embedded first, then the cluster.
 * Default: cluster.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fakeAnswer } from './fake-model.js';
import { freePort } from '@agentry/testing';
import {
  BENCH_POSTGRES_URL,
  commitTree,
  CLK_TCK,
  boxTicks,
  cpuTicks,
  createBenchDatabase,
  machineLine,
  onCleanup,
  pct,
  measureRunCost,
  ROOT,
  runBench,
  sleep,
  sortNum,
  spawnEntry,
  startPrivateRedis,
  waitForHttp,
  type Child,
  type RunCost,
} from './lib.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const BASE = option('base');
if (!BASE) {
  console.error('usage: npm run bench:ab -- --base=<commit> [--rounds=3] [--seconds=6]');
  process.exit(2);
}
const ROUNDS = Number(option('rounds') ?? 3);
const SECONDS = Number(option('seconds') ?? 6);
const HEAD = option('head');
const MODE = option('mode') ?? 'cluster';
if (!['cluster', 'embedded', 'both'].includes(MODE)) {
  console.error('--mode is cluster, embedded or both');
  process.exit(2);
}
const BASE_RUNTIME = option('base-runtime') === 'tsx' ? 'tsx' : 'node';
/** `--log-level=info`: both sides log as a default install does (a line per request, into a file); warn by default. */
const LOG_LEVEL = option('log-level') ?? 'warn';
if (!['warn', 'info', 'debug'].includes(LOG_LEVEL)) {
  console.error('--log-level is warn, info or debug');
  process.exit(2);
}
const TOKENS = 50;
const ANSWER = fakeAnswer(TOKENS);
const ACCOUNT_KEY = `sk-bench-${randomBytes(16).toString('hex')}`;
const PROVIDER_KEY = `sk-bench-provider-${randomBytes(8).toString('hex')}`;
const COUNT_RUNS = 200;

const prepareBase = (commit: string) =>
  commitTree(commit, { folder: 'ab', projects: ['services/gateway', 'services/agent-worker'], built: 'services/agent-worker/dist/src/main.js', label: 'ab' });
/** Its own folder: a cluster A/B may be building the other meanwhile. */
const prepareEmbedded = (commit: string) =>
  commitTree(commit, { folder: 'ab-embedded', projects: ['services/standalone'], built: 'services/standalone/dist/src/main.js', label: 'ab' });


interface Side {
  name: string;
  port: number;
  db: { name: string };
  processes: Child[];
}

async function startSide(name: string, root: string, fakePort: number, redisUrl: string, work: string, runtime: 'tsx' | 'node'): Promise<Side> {
  const dir = fs.mkdtempSync(path.join(work, `${name}-`));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    [
      `logging: {level: ${LOG_LEVEL}}`,
      'server: {host: 127.0.0.1, max_connections_per_address: 0}',
      `data: {root_dir: "${path.join(dir, 'data')}"}`,
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "http://127.0.0.1:${fakePort}/v1", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
      `channels: {api: {accounts: {bench: {name: Bench, api_key: "${ACCOUNT_KEY}"}}}}`,
      'security: {rateLimit: {chat: {requests: 0}}}',
      '',
    ].join('\n'),
  );
  const db = await createBenchDatabase(BENCH_POSTGRES_URL);
  onCleanup(`${name} database`, db.drop);
  const [port, health] = [await freePort(), await freePort()];
  const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl, REDIS_PREFIX: `ab-${name}`, AGENTRY_SECRET_KEY: randomBytes(32).toString('base64'), HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
  const gateway = spawnEntry(`${name}-gateway`, 'services/gateway/src/main.ts', { root, runtime, args: ['--config', config], env: { ...env, PORT: String(port) }, cwd: dir });
  const worker = spawnEntry(`${name}-worker`, 'services/agent-worker/src/main.ts', { root, runtime, args: ['--config', config], env: { ...env, HEALTH_PORT: String(health) }, cwd: dir });
  onCleanup(name, async () => void (await Promise.all([gateway.stop(), worker.stop()])));
  await Promise.all([waitForHttp(`http://127.0.0.1:${port}/ready`, 90_000, gateway), waitForHttp(`http://127.0.0.1:${health}/ready`, 90_000, worker)]);
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'bench', name: 'Bench' },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    }),
  });
  if (res.status !== 201) throw new Error(`${name}: creating the agent: HTTP ${res.status} ${await res.text()}`);
  return { name, port, db, processes: [gateway, worker] };
}

/** One request; resolves with its latency and TTFT (streams), or an error text. */
function once(agent: http.Agent, port: number, stream: boolean): Promise<{ ms: number; ttft: number } | { error: string }> {
  const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream });
  return new Promise((resolve) => {
    const t0 = performance.now();
    let ttft = NaN;
    const req = http.request(
      { host: '127.0.0.1', port, path: '/api/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNT_KEY}` } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (Number.isNaN(ttft) && c.includes('"content":"tok')) ttft = performance.now() - t0;
          text += c;
        });
        res.on('end', () => {
          const ok = res.statusCode === 200 && (stream ? text.includes('tok49 ') && text.includes('[DONE]') : text.includes(ANSWER));
          resolve(ok ? { ms: performance.now() - t0, ttft } : { error: `HTTP ${res.statusCode} ${text.slice(0, 200)}` });
        });
      },
    );
    req.on('error', (err) => resolve({ error: err.message }));
    req.end(body);
  });
}

interface Load {
  done: number;
  errors: number;
  rps: number;
  p50: number;
  ttft50: number;
  ttft99: number;
  /** Gateway + worker CPU ms per request. */
  cpuMs: number;
}

/** C users back to back for `seconds` (after one second of warm-up), or `count` requests in all. */
async function load(side: Pick<Side, 'name' | 'port' | 'processes'>, c: number, stream: boolean, limit: { seconds?: number; count?: number }): Promise<Load> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: c });
  let phase: 'warm' | 'measure' | 'stop' = limit.count ? 'measure' : 'warm';
  const lat: number[] = [];
  const ttft: number[] = [];
  let errors = 0;
  let sent = 0;
  let firstError = '';
  const user = async () => {
    while (phase !== 'stop') {
      if (limit.count && sent >= limit.count) return;
      sent++;
      const r = await once(agent, side.port, stream);
      if (phase !== 'measure') continue;
      if ('error' in r) {
        errors++;
        firstError ||= r.error;
      } else {
        lat.push(r.ms);
        if (stream) ttft.push(r.ttft);
      }
    }
  };
  const users = Array.from({ length: c }, user);
  if (!limit.count) await sleep(1000);
  phase = 'measure';
  const t0 = performance.now();
  const ticks0 = side.processes.map((p) => cpuTicks(p.pid));
  const done0 = lat.length;
  if (limit.seconds) {
    await sleep(limit.seconds * 1000);
    phase = 'stop';
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = side.processes.reduce((s, p, i) => s + cpuTicks(p.pid) - ticks0[i]!, 0);
  const measured = lat.length - done0;
  await Promise.all(users);
  agent.destroy();
  if (firstError) console.log(`    ${side.name}: first error: ${firstError}`);
  const sorted = sortNum(lat);
  const t = sortNum(ttft);
  return {
    done: lat.length,
    errors,
    rps: measured / seconds,
    p50: pct(sorted, 50),
    ttft50: pct(t, 50),
    ttft99: pct(t, 99),
    cpuMs: ((cpu / CLK_TCK) * 1000) / Math.max(1, limit.count ? lat.length : measured),
  };
}

/** Postgres and Redis work per run over COUNT_RUNS runs (bench/lib.ts measureRunCost). */
function cost(side: Side, redisUrl: string, stream: boolean): Promise<RunCost> {
  return measureRunCost({
    send: async (runs) => (await load(side, 8, stream, { count: runs })).done,
    runs: COUNT_RUNS,
    postgresUrl: BENCH_POSTGRES_URL,
    database: side.db.name,
    redisUrl,
  });
}

async function main(): Promise<void> {
  if (MODE !== 'cluster') {
    await embedded();
    if (MODE === 'embedded') return;
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-ab-run-'));
  onCleanup('work', async () => fs.rmSync(work, { recursive: true, force: true }));
  const baseRoot = prepareBase(BASE!);
  const headRoot = HEAD ? prepareBase(HEAD) : ROOT;
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { runtime: 'tsx', args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, 60_000);
  const redis = await startPrivateRedis(await freePort());
  const sides = [await startSide('base', baseRoot, fakePort, redis.url, work, BASE_RUNTIME), await startSide('head', headRoot, fakePort, redis.url, work, 'node')];
  const results = new Map<string, { plain: Load[]; stream: Load[]; one: Load[] }>(sides.map((s) => [s.name, { plain: [], stream: [], one: [] }]));
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const s of order) {
      const box0 = boxTicks();
      const res = results.get(s.name)!;
      res.plain.push(await load(s, 16, false, { seconds: SECONDS }));
      res.stream.push(await load(s, 16, true, { seconds: SECONDS }));
      res.one.push(await load(s, 1, true, { seconds: SECONDS / 2 }));
      const box1 = boxTicks();
      const busy = (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total);
      const [p, st, o] = [res.plain.at(-1)!, res.stream.at(-1)!, res.one.at(-1)!];
      console.log(
        `round ${r + 1} ${s.name}: plain ${p.rps.toFixed(0)} req/s ${p.cpuMs.toFixed(2)} ms CPU/req (${p.errors} err); stream ${st.rps.toFixed(0)}/s ${st.cpuMs.toFixed(2)} ms CPU/stream TTFT p50 ${st.ttft50.toFixed(1)} (${st.errors} err); one stream TTFT p50 ${o.ttft50.toFixed(2)} p99 ${o.ttft99.toFixed(2)}; box ${busy.toFixed(0)} %`,
      );
    }
  }
  const costs = new Map<string, { plain: RunCost; stream: RunCost }>();
  for (const s of sides) costs.set(s.name, { plain: await cost(s, redis.url, false), stream: await cost(s, redis.url, true) });
  const med = (xs: number[]) => pct(sortNum(xs), 50);
  const col = (name: string) => {
    const r = results.get(name)!;
    const c = costs.get(name)!;
    return [
      med(r.plain.map((x) => x.rps)).toFixed(0),
      med(r.plain.map((x) => x.cpuMs)).toFixed(2),
      med(r.stream.map((x) => x.rps)).toFixed(0),
      med(r.stream.map((x) => x.cpuMs)).toFixed(2),
      med(r.one.map((x) => x.ttft50)).toFixed(2),
      med(r.one.map((x) => x.ttft99)).toFixed(2),
      `${c.plain.xacts.toFixed(1)} / ${c.plain.written.toFixed(1)}`,
      `${c.stream.xacts.toFixed(1)} / ${c.stream.written.toFixed(1)}`,
      c.plain.redis.toFixed(1),
      c.stream.redis.toFixed(1),
      `${c.plain.walSyncs.toFixed(2)} / ${c.stream.walSyncs.toFixed(2)}`,
    ];
  };
  const labels = [
    'non-streamed req/s (C=16)',
    'Agentry CPU ms per non-streamed request',
    '50-token streams/s (C=16)',
    'Agentry CPU ms per stream',
    'TTFT p50 ms, one stream (fake: 0)',
    'TTFT p99 ms, one stream',
    'Postgres transactions / rows written per non-streamed run',
    'Postgres transactions / rows written per streamed run',
    'Redis commands per non-streamed run',
    'Redis commands per streamed run',
    'WAL flushes per run, non-streamed / streamed (server-wide pg_stat_wal.wal_sync, idle rate taken out)',
  ];
  const [b, h] = [col('base'), col('head')];
  const head = HEAD ?? `${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim()} (working tree)`;
  console.log(`\n${new Date().toISOString()} ${machineLine()}; ${ROUNDS} rounds x ${SECONDS} s, medians\n`);
  console.log(`| figure | base ${BASE}${BASE_RUNTIME === 'tsx' ? ' (tsx)' : ''} | head ${head} |\n|---|---:|---:|`);
  labels.forEach((l, i) => console.log(`| ${l} | ${b[i]} | ${h[i]} |`));
  for (const s of sides) console.log(`Redis per run, ${s.name}: non-streamed ${costs.get(s.name)!.plain.top}; streamed ${costs.get(s.name)!.stream.top}`);
}


/** The node flags of a tree's `npm start` (`node --liftoff-only ... start.mjs` -> the flags). */
function startFlags(root: string): string[] {
  const start = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start ?? '';
  return start.split(/\s+/).filter((w) => w.startsWith('--'));
}

async function startEmbeddedSide(name: string, root: string, fakePort: number, work: string): Promise<Pick<Side, 'name' | 'port' | 'processes'>> {
  const dir = fs.mkdtempSync(path.join(work, `${name}-embedded-`));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    [
      `logging: {level: ${LOG_LEVEL}}`,
      'server: {host: 127.0.0.1, max_connections_per_address: 0}',
      `data: {root_dir: "${path.join(dir, 'data')}"}`,
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "http://127.0.0.1:${fakePort}/v1", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
      `channels: {api: {accounts: {bench: {name: Bench, api_key: "${ACCOUNT_KEY}"}}}}`,
      'security: {rateLimit: {chat: {requests: 0}}}',
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const flags = startFlags(root);
  const server = spawnEntry(`${name}-standalone`, 'services/standalone/src/main.ts', {
    root,
    args: ['--config', config],
    env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: randomBytes(32).toString('base64') },
    cwd: dir,
    nodeArgs: flags,
  });
  onCleanup(`${name} standalone`, () => server.stop());
  // A new data directory: initdb first, which a loaded box makes slow.
  await waitForHttp(`http://127.0.0.1:${port}/ready`, 5 * 60_000, server);
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'bench', name: 'Bench' },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    }),
  });
  if (res.status !== 201) throw new Error(`${name}: creating the agent: HTTP ${res.status} ${await res.text()}`);
  console.log(`ab: ${name} standalone ready (node ${flags.join(' ') || 'without flags'})`);
  return { name, port, processes: [server] };
}

/** The rounds of `main`, on the standalone: CPU is the one process's, PGlite included. */
async function embedded(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-ab-embedded-run-'));
  onCleanup('embedded work', async () => fs.rmSync(work, { recursive: true, force: true }));
  const baseRoot = prepareEmbedded(BASE!);
  const headRoot = HEAD ? prepareEmbedded(HEAD) : ROOT;
  const fakePort = await freePort();
  const fake = spawnEntry('embedded-fake', 'bench/fake-model.ts', { runtime: 'tsx', args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('embedded fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, 60_000);
  const sides = [await startEmbeddedSide('base', baseRoot, fakePort, work), await startEmbeddedSide('head', headRoot, fakePort, work)];
  const results = new Map<string, { plain: Load[]; stream: Load[]; one: Load[] }>(sides.map((s) => [s.name, { plain: [], stream: [], one: [] }]));
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const s of order) {
      const box0 = boxTicks();
      const res = results.get(s.name)!;
      res.plain.push(await load(s, 16, false, { seconds: SECONDS }));
      res.stream.push(await load(s, 16, true, { seconds: SECONDS }));
      res.one.push(await load(s, 1, true, { seconds: SECONDS / 2 }));
      const box1 = boxTicks();
      const busy = (100 * (box1.busy - box0.busy)) / Math.max(1, box1.total - box0.total);
      const [p, st, o] = [res.plain.at(-1)!, res.stream.at(-1)!, res.one.at(-1)!];
      console.log(
        `embedded round ${r + 1} ${s.name}: plain ${p.rps.toFixed(0)} req/s ${p.cpuMs.toFixed(2)} ms CPU/req (${p.errors} err); stream ${st.rps.toFixed(0)}/s ${st.cpuMs.toFixed(2)} ms CPU/stream (${st.errors} err); one stream TTFT p50 ${o.ttft50.toFixed(2)} p99 ${o.ttft99.toFixed(2)}; box ${busy.toFixed(0)} %`,
      );
    }
  }
  for (const s of sides) await s.processes[0]!.stop();
  const med = (xs: number[]) => pct(sortNum(xs), 50);
  const col = (name: string) => {
    const r = results.get(name)!;
    return [
      med(r.plain.map((x) => x.rps)).toFixed(0),
      med(r.plain.map((x) => x.cpuMs)).toFixed(2),
      med(r.stream.map((x) => x.rps)).toFixed(0),
      med(r.stream.map((x) => x.cpuMs)).toFixed(2),
      med(r.one.map((x) => x.ttft50)).toFixed(2),
      med(r.one.map((x) => x.ttft99)).toFixed(2),
    ];
  };
  const labels = [
    'non-streamed req/s (C=16)',
    'standalone CPU ms per non-streamed request',
    '50-token streams/s (C=16)',
    'standalone CPU ms per stream',
    'TTFT p50 ms, one stream (fake: 0)',
    'TTFT p99 ms, one stream',
  ];
  const [b, h] = [col('base'), col('head')];
  const head = HEAD ?? `${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim()} (working tree)`;
  console.log(`\nembedded (standalone, PGlite, in-process bus): ${new Date().toISOString()} ${machineLine()}; ${ROUNDS} rounds x ${SECONDS} s, medians\n`);
  console.log(`| figure | base ${BASE} | head ${head} | head / base |\n|---|---:|---:|---:|`);
  labels.forEach((l, i) => console.log(`| ${l} | ${b[i]} | ${h[i]} | ${(Number(h[i]) / Number(b[i])).toFixed(2)}x |`));
}

runBench(main, 30 * 60_000);
