/**
 * Issue 12, items 3-5: what one gateway process holds and refuses, and what the services cost.
 *
 *   npm run bench:limits                       # every part, writes docs/benchmarks.md
 *   npm run bench:limits -- --quick --no-write # smaller sizes, print only
 *
 * 1. Invalid-key rejection: a cluster-mode gateway alone (real Postgres and Redis, an API key
 *    configured so chat needs one) gets POST /chat/completions with random wrong keys from 64
 *    keep-alive connections; rejections per second, the gateway's CPU, and the database's
 *    committed transactions over the run (pg_stat_database) as the proof that no request
 *    queried it.
 * 2. Idle streams: the same gateway plus one agent-worker; streaming chats whose model answers
 *    one token and then stays silent are opened in steps up to 10,000; at each step, once the
 *    streams are open and settled, the gateway's RSS per open stream and its event-loop lag over
 *    the next 10 s (prom-client resets its lag histogram on every scrape, so a scrape before and
 *    one after give that window alone).
 * 3. Cold start with an existing data directory to a 200 from /health: `npm start` itself (npm,
 *    the UI freshness check, the launcher), the standalone under tsx, and compiled.
 * 4. RSS of each service idle (compiled and under tsx), and of the gateway and worker under the
 *    idle-stream load.
 *
 * Everything on 127.0.0.1; a throwaway database and Redis prefix, removed at the end.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { cleanupRedisPrefix, freePort } from '@agentry/testing';
import {
  BENCH_POSTGRES_URL,
  BENCH_REDIS_URL,
  CLK_TCK,
  ROOT,
  commandLine,
  cpuTicks,
  createBenchDatabase,
  machineLine,
  onCleanup,
  rssMb,
  runBench,
  scrapeMetrics,
  sleep,
  spawnEntry,
  waitForHttp,
  writeDocSection,
  type Child,
} from './lib.js';

const argv = process.argv.slice(2);
for (const a of argv) {
  if (!/^--(quick|no-write)$/.test(a)) {
    console.error(`unknown argument ${a}; use --quick --no-write`);
    process.exit(2);
  }
}
const QUICK = argv.includes('--quick');
const WRITE = !argv.includes('--no-write');
const POSTGRES_URL = BENCH_POSTGRES_URL;
const REDIS_URL = BENCH_REDIS_URL;
const KEY = 'sk-bench-limits-key-0123456789abcdef';
const REJECT_SECONDS = QUICK ? 3 : 10;
const REJECT_CONNECTIONS = 64;
const STREAM_STEPS = QUICK ? [200, 500] : [1000, 2500, 5000, 10000];
const LAG_WINDOW_MS = QUICK ? 3_000 : 10_000;
const COLD_RUNS = QUICK ? 2 : 5;
const START_TIMEOUT_MS = 90_000;

const SERVICES = [
  ['gateway', 'services/gateway/src/main.ts'],
  ['agent-worker', 'services/agent-worker/src/main.ts'],
  ['scheduler', 'services/scheduler/src/main.ts'],
  ['channel-connector', 'services/channel-connector/src/main.ts'],
] as const;

async function main(): Promise<void> {
  const started = Date.now();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-limits-'));
  onCleanup('work directory', async () => fs.rmSync(work, { recursive: true, force: true }));
  const db = await createBenchDatabase(POSTGRES_URL);
  onCleanup('database', db.drop);
  const prefix = `bench-limits-${Date.now().toString(36)}`;
  onCleanup('redis keys', () => cleanupRedisPrefix(REDIS_URL, prefix));
  const fake = await startSilentModel();
  onCleanup('silent model', fake.close);
  const configPath = path.join(work, 'config.yaml');
  fs.writeFileSync(
    configPath,
    [
      'logging: {level: warn}',
      // Every stream comes from this one address: the per-address connection cap (256) is off.
      'server: {max_connections_per_address: 0}',
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
      `channels: {api: {accounts: {bench: {api_key: "${KEY}"}}}}`,
      // One key sends every request: the per-credential chat limit (600 a minute by default) is off.
      'security: {rateLimit: {chat: {requests: 0}}}',
    ].join('\n'),
  );
  const env = { DATABASE_URL: db.url, REDIS_URL, REDIS_PREFIX: prefix, AGENTRY_SECRET_KEY: 'bench-limits-master-key-0123456789', HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
  const lines: string[] = [];
  const running: Child[] = [];
  const stopAll = async () => {
    await Promise.all(running.splice(0).map((c) => c.stop('SIGKILL')));
  };
  onCleanup('services', stopAll);

  /** Starts a service and waits for its /ready (logging is at warn: no start-up line to wait for). */
  const startService = async (name: string, entry: string, runtime: 'tsx' | 'node' = 'tsx') => {
    const port = await freePort();
    const svc = spawnEntry(`${name}-${runtime}`, entry, {
      args: ['--config', configPath],
      env: { ...env, PORT: String(port), HEALTH_PORT: String(port) },
      cwd: work,
      runtime,
    });
    running.push(svc);
    await waitForHttp(`http://127.0.0.1:${port}/ready`, START_TIMEOUT_MS, svc);
    return { svc, base: `http://127.0.0.1:${port}` };
  };

  const { svc: gateway, base } = await startService('gateway', SERVICES[0][1]);
  await sleep(2000);

  // 1. Invalid keys.
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  const commits = async () => {
    await sleep(1500); // Postgres flushes backend statistics about once a second.
    const r = await admin.query<{ n: string }>('select xact_commit::text as n from pg_stat_database where datname = current_database()');
    return Number(r.rows[0]!.n);
  };
  const before = await commits();
  const ticks0 = cpuTicks(gateway.pid);
  const reject = await hammer(`${base}/api/v1/chat/completions`, REJECT_SECONDS * 1000, REJECT_CONNECTIONS);
  const cpuSeconds = (cpuTicks(gateway.pid) - ticks0) / CLK_TCK;
  // Our own two queries (this one and the one before) commit too.
  const after = await commits();
  await admin.end();
  const dbTx = after - before - 1;
  lines.push(
    '### Invalid API keys',
    '',
    '| requests | seconds | 401/s | other answers | gateway CPU (cores) | 401/s per gateway core | database transactions during the run |',
    '|---|---|---|---|---|---|---|',
    `| ${reject.ok401 + reject.other} | ${reject.seconds.toFixed(1)} | ${Math.round(reject.ok401 / reject.seconds)} | ${reject.other} | ${(cpuSeconds / reject.seconds).toFixed(2)} | ${Math.round(reject.ok401 / cpuSeconds)} | ${dbTx} (background refreshes, not per request) |`,
    '',
  );
  console.log(lines.slice(-3).join('\n'));

  // 2. Idle streams, 4. RSS under that load.
  const { svc: worker } = await startService('agent-worker', SERVICES[1][1]);
  await sleep(2000);
  const baseline = rssMb(gateway.pid);
  const agent = await fetch(`${base}/api/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ruleChain: { id: 'idle', name: 'Idle' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] } }),
  });
  if (agent.status !== 201) throw new Error(`agent create: ${agent.status} ${await agent.text()}`);
  const agentOpts = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const open: http.ClientRequest[] = [];
  let opened = 0;
  let failed = 0;
  const failures = new Set<string>();
  lines.push(
    '### Idle SSE streams on one gateway',
    '',
    `| open streams | gateway RSS (MB) | KB per stream | event-loop lag p50 / p99 / max over ${LAG_WINDOW_MS / 1000} s (ms) | worker RSS (MB) | failed to open |`,
    '|---|---|---|---|---|---|',
  );
  for (const target of STREAM_STEPS) {
    while (opened < target) {
      const batch = Math.min(200, target - opened);
      await Promise.all(
        Array.from({ length: batch }, () =>
          openStream(`${base}/api/v1/chat/completions`, agentOpts, open).catch((err: unknown) => {
            failed++;
            failures.add(err instanceof Error ? err.message : String(err));
          }),
        ),
      );
      opened += batch;
    }
    await sleep(3000);
    const rss = rssMb(gateway.pid);
    await scrapeMetrics(`${base}/metrics`); // resets the lag histogram: the window starts now
    await sleep(LAG_WINDOW_MS);
    const m = await scrapeMetrics(`${base}/metrics`);
    const lag = (name: string) => ((m.first.get(name) ?? NaN) * 1000).toFixed(1);
    lines.push(
      `| ${opened - failed} | ${rss.toFixed(0)} | ${(((rss - baseline) * 1024) / Math.max(1, opened - failed)).toFixed(1)} | ${lag('nodejs_eventloop_lag_p50_seconds')} / ${lag('nodejs_eventloop_lag_p99_seconds')} / ${lag('nodejs_eventloop_lag_max_seconds')} | ${rssMb(worker.pid).toFixed(0)} | ${failed} |`,
    );
    console.log(lines.at(-1));
  }
  if (failures.size > 0) lines.push('', `Failures to open: ${[...failures].slice(0, 3).join('; ')}.`);
  lines.push('');
  for (const req of open) req.destroy();
  agentOpts.destroy();
  await stopAll();

  // 4. Idle RSS of each service, under tsx and compiled.
  const compiled = SERVICES.every(([, entry]) => fs.existsSync(path.join(ROOT, entry.replace('/src/main.ts', '/dist/src/main.js'))));
  const idle: Array<{ name: string; tsx: number; node: number }> = [];
  for (const [name, entry] of SERVICES) {
    const row = { name, tsx: NaN, node: NaN };
    for (const runtime of compiled ? (['tsx', 'node'] as const) : (['tsx'] as const)) {
      const { svc } = await startService(name, entry, runtime);
      await sleep(3000);
      row[runtime] = rssMb(svc.pid);
      await stopAll();
    }
    idle.push(row);
  }
  lines.push(
    '### RSS of each service, idle (cluster mode)',
    '',
    `| service | RSS under tsx (\`npm run start:*\`) MB | RSS compiled (\`node dist\`, the image) MB |`,
    '|---|---|---|',
    ...idle.map((r) => `| ${r.name} | ${r.tsx.toFixed(0)} | ${Number.isNaN(r.node) ? 'not built' : r.node.toFixed(0)} |`),
    '',
  );
  console.log(lines.slice(-6).join('\n'));

  // 3. Cold start, embedded, existing data directory.
  const dataDir = path.join(work, 'embedded');
  fs.mkdirSync(dataDir);
  // The data directory is named in the file: `npm start --prefix` runs in the repository, whose
  // own ./data must not be touched.
  const coldConfig = path.join(dataDir, 'config.yaml');
  fs.writeFileSync(coldConfig, `logging: {level: warn}\ndata: {root_dir: "${path.join(dataDir, 'data')}"}\n`);
  const coldArgs = ['--config', coldConfig];
  const cold = async (label: string, start: (port: number) => { stop(): Promise<void>; alive(): boolean }) => {
    const times: number[] = [];
    for (let i = 0; i <= COLD_RUNS; i++) {
      const port = await freePort();
      const t0 = performance.now();
      const proc = start(port);
      while (performance.now() - t0 < 120_000 && proc.alive()) {
        if (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status === 200, () => false)) break;
        await sleep(10);
      }
      const ms = performance.now() - t0;
      await proc.stop();
      // The first start of a label may create the data directory (initdb) or warm the page cache.
      if (i > 0) times.push(ms);
    }
    times.sort((a, b) => a - b);
    return `| ${label} | ${times[Math.floor(times.length / 2)]!.toFixed(0)} | ${times[0]!.toFixed(0)} | ${times.at(-1)!.toFixed(0)} |`;
  };
  const standaloneEnv = (port: number) => ({ PORT: String(port), HOST: '127.0.0.1' });
  const coldRows = [
    await cold('`npm start` (npm, the UI check, the launcher: compiled when the build is fresh)', (port) => npmStart(coldArgs, standaloneEnv(port))),
    await cold('`services/standalone/src/main.ts` under tsx', (port) => spawnEntry('cold-tsx', 'services/standalone/src/main.ts', { cwd: dataDir, env: standaloneEnv(port), args: coldArgs })),
  ];
  if (compiled) {
    coldRows.push(await cold('`services/standalone/dist/src/main.js` (compiled)', (port) => spawnEntry('cold-node', 'services/standalone/src/main.ts', { cwd: dataDir, env: standaloneEnv(port), args: coldArgs, runtime: 'node' })));
  }
  lines.push(
    '### Cold start of the embedded mode with an existing data directory',
    '',
    `${COLD_RUNS} starts each (after one that is not counted) to a 200 from \`/health\`, with a data directory that exists (\`--config\` names it).`,
    '',
    '| command | median ms | fastest ms | slowest ms |',
    '|---|---|---|---|',
    ...coldRows,
    '',
  );
  console.log(lines.slice(-6).join('\n'));

  const body = [
    '<!-- bench:gateway-limits:start -->',
    `## Gateway limits, cold start and idle memory (${new Date().toISOString().replace(/\.\d+Z$/, 'Z')})`,
    '',
    `Machine: ${machineLine()}; command \`${commandLine('bench:limits')}\`; ${Math.round((Date.now() - started) / 1000)} s. The load generator runs on the same cores. Written by the script; re-running replaces it.`,
    '',
    ...lines,
    '<!-- bench:gateway-limits:end -->',
  ].join('\n');
  console.log(body);
  if (WRITE) writeDocSection('gateway-limits', body);
}

/** `npm start` as a newcomer types it (in the repository), with arguments for the standalone. */
function npmStart(args: string[], env: Record<string, string>): { stop(): Promise<void>; alive(): boolean } {
  const proc = spawn('npm', ['start', '--', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: 'ignore',
    detached: true, // its own process group: npm, sh and node stop together
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const alive = () => proc.exitCode === null && proc.signalCode === null;
  return {
    alive,
    async stop() {
      if (alive()) process.kill(-proc.pid!, 'SIGTERM');
      await Promise.race([exited, sleep(15_000)]);
      if (alive()) process.kill(-proc.pid!, 'SIGKILL');
    },
  };
}

/** Sends requests with wrong keys on `connections` keep-alive connections for `ms`. */
async function hammer(url: string, ms: number, connections: number): Promise<{ ok401: number; other: number; seconds: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const body = JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'hi' }] });
  const u = new URL(url);
  let ok401 = 0;
  let other = 0;
  const end = Date.now() + ms;
  const t0 = performance.now();
  const loop = async (id: number) => {
    let n = 0;
    while (Date.now() < end) {
      const status = await new Promise<number>((resolve) => {
        const req = http.request(
          { agent, host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer sk-wrong-${id}-${n++}` } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', () => resolve(0));
        req.end(body);
      });
      if (status === 401) ok401++;
      else other++;
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, i) => loop(i)));
  agent.destroy();
  return { ok401, other, seconds: (performance.now() - t0) / 1000 };
}

/** Opens one streaming chat and resolves once its response head arrived (the stream then idles). */
function openStream(url: string, agent: http.Agent, keep: http.ClientRequest[]): Promise<void> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { agent, host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` } },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`status ${res.statusCode}`));
        }
        // Runs beyond the workers' concurrency wait in the queue: their streams are open (head
        // sent, heartbeats only) without a first token, which is the idle case measured here.
        res.on('data', () => undefined);
        res.on('error', () => undefined);
        resolve();
      },
    );
    req.on('error', reject);
    req.setTimeout(60_000, () => reject(new Error('timeout')));
    req.end(JSON.stringify({ model: 'idle', stream: true, messages: [{ role: 'user', content: 'wait' }] }));
    keep.push(req);
  });
}

/** An OpenAI-compatible model that answers one token and then stays silent (streams stay open). */
async function startSilentModel(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = { id: 'c', object: 'chat.completion.chunk', created: 0, model: 'fake-model', choices: [{ index: 0, delta: { role: 'assistant', content: 'first ' }, finish_reason: null }] };
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

runBench(main, 25 * 60_000);
