/**
 * Issue 39, 200 paced streams: what each relayed token costs, one change against the commit
 * before it, in one run, the two builds alternating round by round (base-head, head-base, ...) so
 * that a shared box's drift falls on both alike. The latency goals (added TTFT and per-token p99
 * at 200 paced streams) cannot be judged on a 2-core box shared with other work; what a change
 * does to the work per token can: CPU of the gateway, the worker and Redis (from /proc) per token
 * and per stream, Redis commands and bytes per token (`INFO commandstats` and `INFO stats` of a
 * redis-server of the bench's own).
 *
 *   npx tsx --conditions=@agentry/source bench/paced-ab.ts --base=<commit> [--head=<commit>] [--streams=200] [--rounds=3] [--seconds=4]
 *   npx tsx --conditions=@agentry/source bench/paced-ab.ts --commits=<c1>,<c2>,<c3>,...   # a chain of levers, each beside the one before
 *
 * Both sides run as a cluster (gateway + one agent-worker, compiled, `worker.concurrency: 500`)
 * on a database each of the local Postgres and the same private Redis (one side idles while the
 * other is measured), against one fake model answering 50 deltas at 50 tokens/s. Per round and
 * side: N virtual users stream back to back, their first requests spread over one second (as
 * `bench:chat`'s paced levels); after 2 s of warm-up the window of `--seconds` is measured, then
 * the users finish their streams. Tokens are counted as they arrive in the window; streams are
 * those started in it. Every stream (warm-up included) is checked token by token.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { fakeAnswer } from './fake-model.js';
import { streamOnce, type Endpoint } from './sse-client.js';
import { freePort } from '@agentry/testing';
import {
  commitTree,
  BENCH_POSTGRES_URL,
  CLK_TCK,
  boxTicks,
  cpuTicks,
  createBenchDatabase,
  machineLine,
  onCleanup,
  pct,
  redisCommandCounts,
  ROOT,
  runBench,
  sleep,
  sortNum,
  spawnEntry,
  startPrivateRedis,
  waitForHttp,
  type Child,
} from './lib.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const BASE = option('base');
const HEAD = option('head');
/** Every side: `--commits`, else base and head (the working tree when no head is given). */
const COMMITS: Array<string | undefined> = option('commits')?.split(',') ?? (BASE ? [BASE, HEAD] : []);
if (COMMITS.length < 2) {
  console.error('usage: bench/paced-ab.ts --base=<commit> [--head=<commit>] | --commits=<c1>,<c2>,... [--streams=200] [--rounds=3] [--seconds=4]');
  process.exit(2);
}
const STREAMS = Number(option('streams') ?? 200);
const ROUNDS = Number(option('rounds') ?? 3);
const SECONDS = Number(option('seconds') ?? 4);
const TOKENS = 50;
const WARM_MS = 2_000;
const ACCOUNT_KEY = `sk-bench-${randomBytes(16).toString('hex')}`;
const PROVIDER_KEY = `sk-bench-provider-${randomBytes(8).toString('hex')}`;
const EXPECT = { tokens: TOKENS, text: fakeAnswer(TOKENS), timeoutMs: 60_000 };

/** The same trees as bench/ab.ts's cluster side. */
const prepare = (commit: string) =>
  commitTree(commit, { folder: 'ab', projects: ['services/gateway', 'services/agent-worker'], built: 'services/agent-worker/dist/src/main.js', label: 'paced-ab' });


interface Side {
  name: string;
  gateway: Child;
  worker: Child;
  endpoint: Endpoint;
}

async function startSide(name: string, root: string, fakePort: number, redisUrl: string, work: string): Promise<Side> {
  const dir = fs.mkdtempSync(path.join(work, `${name}-`));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    [
      'logging: {level: warn}',
      'server: {host: 127.0.0.1, max_connections_per_address: 0}',
      `data: {root_dir: "${path.join(dir, 'data')}"}`,
      // Every stream of the level has a run slot (the shipped 100 would queue half of 200).
      'worker: {concurrency: 500}',
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
  const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl, REDIS_PREFIX: `paced-${name}`, AGENTRY_SECRET_KEY: randomBytes(32).toString('base64'), HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
  const gateway = spawnEntry(`${name}-gateway`, 'services/gateway/src/main.ts', { root, runtime: 'node', args: ['--config', config], env: { ...env, PORT: String(port) }, cwd: dir });
  const worker = spawnEntry(`${name}-worker`, 'services/agent-worker/src/main.ts', { root, runtime: 'node', args: ['--config', config], env: { ...env, HEALTH_PORT: String(health) }, cwd: dir });
  onCleanup(name, async () => void (await Promise.all([gateway.stop(), worker.stop()])));
  await Promise.all([waitForHttp(`http://127.0.0.1:${port}/ready`, 90_000, gateway), waitForHttp(`http://127.0.0.1:${health}/ready`, 90_000, worker)]);
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'paced', name: 'Paced' },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    }),
  });
  if (res.status !== 201) throw new Error(`${name}: creating the agent: HTTP ${res.status} ${await res.text()}`);
  const endpoint: Endpoint = {
    port,
    path: '/api/v1/chat/completions',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNT_KEY}` },
    body: JSON.stringify({ model: 'paced', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream: true }),
    agent: new http.Agent({ keepAlive: true, maxSockets: Infinity }),
  };
  return { name, gateway, worker, endpoint };
}

async function redisStats(url: string): Promise<{ commands: number; netIn: number; netOut: number }> {
  const counts = await redisCommandCounts(url);
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => {});
  try {
    await r.connect();
    const text = await r.info('stats');
    const num = (k: string) => Number(new RegExp(`^${k}:(\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return { commands: [...counts.values()].reduce((a, b) => a + b, 0), netIn: num('total_net_input_bytes'), netOut: num('total_net_output_bytes') };
  } finally {
    r.disconnect();
  }
}

/** read(2)- and write(2)-family calls of a process so far (/proc/<pid>/io: syscr + syscw; writev and readv included). */
function ioCalls(pid: number): { r: number; w: number } {
  const text = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  const num = (k: string) => Number(new RegExp(`^${k}: (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { r: num('syscr'), w: num('syscw') };
}

interface Window {
  tokens: number;
  streams: number;
  errors: number;
  bad: number;
  /** CPU ms in the window: gateway, worker, Redis. */
  cpu: { gateway: number; worker: number; redis: number };
  /** Writes and reads of the gateway and the worker in the window. */
  io: { gatewayW: number; gatewayR: number; workerW: number; workerR: number };
  commands: number;
  netIn: number;
  netOut: number;
  ttft50: number;
  ttft99: number;
  gap99: number;
  box: number;
}

async function measure(side: Side, redis: { url: string; pid: number }): Promise<Window> {
  let phase: 'warm' | 'measure' | 'stop' = 'warm';
  let tokens = 0;
  let streams = 0;
  let errors = 0;
  let bad = 0;
  const ttft: number[] = [];
  const gaps: number[] = [];
  let firstError = '';
  // Tokens are counted as they arrive, by the window they arrive in: a thin wrapper over the agent's sockets would cost more than this.
  const user = async (i: number) => {
    await sleep((1000 * i) / STREAMS);
    while (phase !== 'stop') {
      const inWindow = phase === 'measure';
      if (inWindow) streams++;
      const t0 = performance.now();
      const s = await streamOnce(side.endpoint, EXPECT);
      const f = s.fidelity;
      bad += f.lost + f.duplicated + f.reordered;
      if (!s.ok) {
        errors++;
        firstError ||= s.error ?? '';
      }
      // Tokens of this stream that arrived inside the window: estimated from its arrival times.
      const arrivals = [t0 + s.ttftMs];
      for (const g of s.gaps) arrivals.push(arrivals.at(-1)! + g);
      tokens += arrivals.filter((t) => t >= win.t0 && (win.t1 === 0 || t < win.t1)).length;
      if (inWindow && s.ok) {
        ttft.push(s.ttftMs);
        gaps.push(...s.gaps);
      }
    }
  };
  const win = { t0: Infinity, t1: 0 };
  const users = Array.from({ length: STREAMS }, (_, i) => user(i));
  await sleep(WARM_MS);
  const r0 = await redisStats(redis.url);
  const c0 = [cpuTicks(side.gateway.pid), cpuTicks(side.worker.pid), cpuTicks(redis.pid)];
  const b0 = boxTicks();
  const io0 = [ioCalls(side.gateway.pid), ioCalls(side.worker.pid)];
  win.t0 = performance.now();
  phase = 'measure';
  await sleep(SECONDS * 1000);
  win.t1 = performance.now();
  phase = 'stop';
  const c1 = [cpuTicks(side.gateway.pid), cpuTicks(side.worker.pid), cpuTicks(redis.pid)];
  const b1 = boxTicks();
  const io1 = [ioCalls(side.gateway.pid), ioCalls(side.worker.pid)];
  const r1 = await redisStats(redis.url);
  await Promise.all(users);
  if (firstError) console.log(`    ${side.name}: first error: ${firstError}`);
  const ms = (i: number) => ((c1[i]! - c0[i]!) / CLK_TCK) * 1000;
  const t = sortNum(ttft);
  return {
    tokens,
    streams,
    errors,
    bad,
    cpu: { gateway: ms(0), worker: ms(1), redis: ms(2) },
    io: { gatewayW: io1[0]!.w - io0[0]!.w, gatewayR: io1[0]!.r - io0[0]!.r, workerW: io1[1]!.w - io0[1]!.w, workerR: io1[1]!.r - io0[1]!.r },
    // The stats reads themselves (two INFOs and a connection each side) are a handful of commands against thousands.
    commands: r1.commands - r0.commands,
    netIn: r1.netIn - r0.netIn,
    netOut: r1.netOut - r0.netOut,
    ttft50: pct(t, 50),
    ttft99: pct(t, 99),
    gap99: pct(sortNum(gaps), 99),
    box: (100 * (b1.busy - b0.busy)) / Math.max(1, b1.total - b0.total),
  };
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-paced-ab-'));
  onCleanup('work', async () => fs.rmSync(work, { recursive: true, force: true }));
  const roots = COMMITS.map((c) => (c ? prepare(c) : ROOT));
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { runtime: 'tsx', args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=50', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, 60_000);
  const redis = await startPrivateRedis(await freePort());
  const names = COMMITS.map((c) => c ?? `${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim()}+tree`);
  const sides: Side[] = [];
  for (const [i, root] of roots.entries()) sides.push(await startSide(names[i]!, root, fakePort, redis.url, work));
  const results = new Map<string, Window[]>(sides.map((s) => [s.name, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const w = await measure(s, redis);
      results.get(s.name)!.push(w);
      console.log(
        `round ${r + 1} ${s.name}: ${w.streams} streams ${w.tokens} tokens (${w.errors} err, ${w.bad} bad tokens) | CPU us/token gateway ${((1000 * w.cpu.gateway) / w.tokens).toFixed(1)} worker ${((1000 * w.cpu.worker) / w.tokens).toFixed(1)} redis ${((1000 * w.cpu.redis) / w.tokens).toFixed(1)}` +
          ` | writes/token gateway ${(w.io.gatewayW / w.tokens).toFixed(2)} worker ${(w.io.workerW / w.tokens).toFixed(2)} | redis cmds/token ${(w.commands / w.tokens).toFixed(2)} | TTFT p50 ${w.ttft50.toFixed(0)} p99 ${w.ttft99.toFixed(0)} gap p99 ${w.gap99.toFixed(0)} | box ${w.box.toFixed(0)} %`,
      );
    }
  }
  const med = (xs: number[]) => pct(sortNum(xs), 50);
  const rows: Array<[string, (w: Window) => number, number]> = [
    ['tokens relayed in the window', (w) => w.tokens, 0],
    ['streams started in the window', (w) => w.streams, 0],
    ['gateway CPU us per token', (w) => (1000 * w.cpu.gateway) / w.tokens, 1],
    ['worker CPU us per token', (w) => (1000 * w.cpu.worker) / w.tokens, 1],
    ['Redis CPU us per token', (w) => (1000 * w.cpu.redis) / w.tokens, 1],
    ['gateway + worker CPU ms per stream', (w) => (w.cpu.gateway + w.cpu.worker) / Math.max(1, w.streams), 2],
    ['gateway writes / reads per token (syscalls)', (w) => w.io.gatewayW / w.tokens, 2],
    ['', (w) => w.io.gatewayR / w.tokens, 2],
    ['worker writes / reads per token (syscalls)', (w) => w.io.workerW / w.tokens, 2],
    ['', (w) => w.io.workerR / w.tokens, 2],
    ['Redis commands per token', (w) => w.commands / w.tokens, 2],
    ['Redis bytes in / out per token', (w) => w.netIn / w.tokens, 0],
    ['', (w) => w.netOut / w.tokens, 0],
    ['TTFT p50 / p99 ms (box-bound)', (w) => w.ttft50, 0],
    ['', (w) => w.ttft99, 0],
    ['token gap p99 ms (box-bound; 20 at the fake)', (w) => w.gap99, 0],
    ['box busy %', (w) => w.box, 0],
  ];
  console.log(`\n${new Date().toISOString()} ${machineLine()}; ${STREAMS} paced streams, ${ROUNDS} rounds x ${SECONDS} s, medians\n`);
  console.log(`| figure | ${names.join(' | ')} |\n|---|${names.map(() => '---:|').join('')}`);
  const cell = (name: string, i: number) => {
    const [label, f, digits] = rows[i]!;
    const v = med(results.get(name)!.map(f)).toFixed(digits);
    const next = rows[i + 1];
    return next && next[0] === '' && label !== '' ? `${v} / ${med(results.get(name)!.map(next[1])).toFixed(next[2])}` : v;
  };
  rows.forEach(([label], i) => {
    if (label !== '') console.log(`| ${label} | ${names.map((n) => cell(n, i)).join(' | ')} |`);
  });
  const sum = (name: string, f: (w: Window) => number) => results.get(name)!.reduce((s, w) => s + f(w), 0);
  for (const s of sides) console.log(`${s.name}: errors ${sum(s.name, (w) => w.errors)}, lost+duplicated+reordered tokens ${sum(s.name, (w) => w.bad)} (every stream, warm-up included)`);
}

runBench(main, 30 * 60_000);
