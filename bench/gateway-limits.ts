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
 *    one token and then stays silent are opened in steps up to 10,000; the gateway's RSS per open
 *    stream and its event-loop lag (its own /metrics) at each step.
 * 3. Cold start: `services/standalone/src/main.ts` (what `npm start` runs, without npm's own
 *    start-up and the UI freshness check) to a 200 from /health with an existing data directory.
 * 4. RSS of each service idle, and of the gateway and worker under the idle-stream load.
 *
 * Everything on 127.0.0.1; a throwaway database and Redis prefix, removed at the end.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { migrateToLatest, openPostgres } from '@agentry/db';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOC = path.join(ROOT, 'docs/benchmarks.md');
const MARK_START = '<!-- bench:gateway-limits:start -->';
const MARK_END = '<!-- bench:gateway-limits:end -->';
const QUICK = process.argv.includes('--quick');
const WRITE = !process.argv.includes('--no-write');
const KEY = 'sk-bench-limits-key-0123456789abcdef';
const REJECT_SECONDS = QUICK ? 3 : 10;
const REJECT_CONNECTIONS = 64;
const STREAM_STEPS = QUICK ? [200, 500] : [1000, 2500, 5000, 10000];
const COLD_RUNS = QUICK ? 2 : 5;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const rssMb = (pid: number | undefined): number => {
  if (!pid) return NaN;
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};
const cpuTicks = (pid: number): number => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
};
const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

async function main(): Promise<void> {
  const started = Date.now();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-limits-'));
  const db = await createDatabase();
  const prefix = `bench-limits-${randomBytes(4).toString('hex')}`;
  const fake = await startSilentModel();
  const configPath = path.join(work, 'config.yaml');
  fs.writeFileSync(
    configPath,
    [
      'logging: {level: warn}',
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
      `channels: {api: {accounts: {bench: {api_key: "${KEY}"}}}}`,
    ].join('\n'),
  );
  const env = { DATABASE_URL: db.url, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379', REDIS_PREFIX: prefix, AGENTRY_SECRET_KEY: 'bench-limits-master-key-0123456789', HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1', HEALTH_PORT: '0' };
  const procs: SpawnedService[] = [];
  const lines: string[] = [];
  try {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const gateway = spawnService('services/gateway/src/main.ts', { args: ['--config', configPath], env: { ...env, PORT: String(port) } });
    procs.push(gateway);
    await waitReady(`${base}/ready`, gateway);
    await sleep(2000);
    const idle: Record<string, number> = { gateway: rssMb(gateway.proc.pid) };

    // 1. Invalid keys.
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    const commits = async () => {
      await sleep(1500); // Postgres flushes backend statistics about once a second.
      const r = await admin.query<{ n: string }>('select xact_commit::text as n from pg_stat_database where datname = current_database()');
      return Number(r.rows[0]!.n);
    };
    const before = await commits();
    const ticks0 = cpuTicks(gateway.proc.pid!);
    const reject = await hammer(`${base}/api/v1/chat/completions`, REJECT_SECONDS * 1000, REJECT_CONNECTIONS);
    const cpuSeconds = (cpuTicks(gateway.proc.pid!) - ticks0) / TICK;
    // Our own two queries (this one and the one before) commit too.
    const after = await commits();
    await admin.end();
    const dbTx = after - before - 1;
    const rps = reject.ok401 / reject.seconds;
    lines.push(
      '### Invalid API keys',
      '',
      `| requests | seconds | 401/s | other answers | gateway CPU (cores) | 401/s per gateway core | database transactions during the run |`,
      '|---|---|---|---|---|---|---|',
      `| ${reject.ok401 + reject.other} | ${reject.seconds.toFixed(1)} | ${Math.round(rps)} | ${reject.other} | ${(cpuSeconds / reject.seconds).toFixed(2)} | ${Math.round(reject.ok401 / cpuSeconds)} | ${dbTx} (background refreshes, not per request) |`,
      '',
    );

    // 2. Idle streams, 4. RSS under that load.
    const workerPort = await freePort();
    const worker = spawnService('services/agent-worker/src/main.ts', { args: ['--config', configPath], env: { ...env, HEALTH_PORT: String(workerPort) } });
    procs.push(worker);
    await waitReady(`http://127.0.0.1:${workerPort}/ready`, worker);
    await sleep(2000);
    idle['agent-worker'] = rssMb(worker.proc.pid);
    const baseline = rssMb(gateway.proc.pid);
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
    lines.push('### Idle SSE streams on one gateway', '', '| open streams | gateway RSS (MB) | KB per stream | event-loop lag p99 (ms) | worker RSS (MB) | failed to open |', '|---|---|---|---|---|---|');
    for (const target of STREAM_STEPS) {
      while (opened < target) {
        const batch = Math.min(200, target - opened);
        await Promise.all(Array.from({ length: batch }, () => openStream(`${base}/api/v1/chat/completions`, agentOpts, open).catch(() => void failed++)));
        opened += batch;
      }
      await sleep(3000);
      const rss = rssMb(gateway.proc.pid);
      const lag = await eventLoopLagMs(base);
      lines.push(`| ${opened - failed} | ${rss.toFixed(0)} | ${(((rss - baseline) * 1024) / Math.max(1, opened - failed)).toFixed(1)} | ${lag.toFixed(1)} | ${rssMb(worker.proc.pid).toFixed(0)} | ${failed} |`);
      console.log(lines.at(-1));
    }
    lines.push('');
    for (const req of open) req.destroy();
    await sleep(3000);

    // 4. Idle RSS of the other two services.
    for (const [name, entry] of [
      ['scheduler', 'services/scheduler/src/main.ts'],
      ['channel-connector', 'services/channel-connector/src/main.ts'],
    ] as const) {
      const healthPort = await freePort();
      const svc = spawnService(entry, { args: ['--config', configPath], env: { ...env, HEALTH_PORT: String(healthPort) } });
      procs.push(svc);
      await waitReady(`http://127.0.0.1:${healthPort}/ready`, svc);
      await sleep(2000);
      idle[name] = rssMb(svc.proc.pid);
    }
    lines.push('### RSS of each service, idle (cluster mode, under tsx as `npm run start:*` runs them)', '', '| service | RSS (MB) |', '|---|---|');
    for (const [name, mb] of Object.entries(idle)) lines.push(`| ${name} | ${mb.toFixed(0)} |`);
    lines.push('');
  } finally {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await fake.close();
    await db.drop();
  }

  // 3. Cold start, embedded, existing data directory.
  const dataDir = path.join(work, 'embedded');
  fs.mkdirSync(dataDir);
  const cold: number[] = [];
  for (let i = 0; i <= COLD_RUNS; i++) {
    const port = await freePort();
    fs.writeFileSync(path.join(dataDir, 'config.yaml'), `server: {host: 127.0.0.1, port: ${port}}\nlogging: {level: warn}\n`);
    const t0 = Date.now();
    const svc = spawnService('services/standalone/src/main.ts', { cwd: dataDir, env: { PORT: String(port) } });
    while (Date.now() - t0 < 120_000) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status === 200).catch(() => false);
      if (ok) break;
      await sleep(20);
    }
    // The first start creates the data directory (initdb); the others find it.
    if (i > 0) cold.push(Date.now() - t0);
    await svc.stop('SIGTERM');
  }
  cold.sort((a, b) => a - b);
  lines.push(
    '### Cold start of the embedded mode with an existing data directory',
    '',
    `${COLD_RUNS} starts of \`services/standalone/src/main.ts\` (tsx, as \`npm start\` runs it) to a 200 from \`/health\`: median ${cold[Math.floor(cold.length / 2)]} ms, fastest ${cold[0]} ms, slowest ${cold.at(-1)} ms. \`npm start\` adds npm's own start-up and the UI freshness check (about 0.1 s when the build is current).`,
    '',
  );
  fs.rmSync(work, { recursive: true, force: true });

  const body = [
    MARK_START,
    `## Gateway limits (${new Date().toISOString()})`,
    '',
    `Machine: ${os.availableParallelism()} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; commit ${gitCommit()}; command \`npm run bench:limits${QUICK ? ' -- --quick' : ''}\`; ${Math.round((Date.now() - started) / 1000)} s. The load generator runs on the same 2 cores.`,
    '',
    ...lines,
    MARK_END,
  ].join('\n');
  console.log(body);
  if (WRITE) writeDoc(body);
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
        if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
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

async function eventLoopLagMs(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = /^nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([\d.e+-]+)/m.exec(text);
  return m ? Number(m[1]) * 1000 : NaN;
}

/** A throwaway, migrated database on the local Postgres (DATABASE_URL names the server). */
async function createDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
  const name = `agentry_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(server.toString());
  url.pathname = `/${name}`;
  const handle = openPostgres({ url: url.toString() });
  await migrateToLatest(handle.db);
  await handle.close();
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: server.toString() });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

interface SpawnedService {
  proc: ChildProcess;
  output(): string;
  stop(signal: NodeJS.Signals): Promise<void>;
}

/** Polls a readiness URL (logging is at warn, so there is no start-up line to wait for). */
async function waitReady(url: string, svc: SpawnedService, timeoutMs = 90_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await fetch(url).then((r) => r.status === 200).catch(() => false)) return;
    if (Date.now() > end || svc.proc.exitCode !== null) throw new Error(`${url} not ready:\n${svc.output().slice(-2000)}`);
    await sleep(100);
  }
}

/** Starts a service's main.ts as `npm run start:*` does (tsx, source condition). */
function spawnService(entry: string, opts: { args?: string[]; env?: Record<string, string>; cwd?: string }): SpawnedService {
  const proc = spawn(process.execPath, ['--conditions=@agentry/source', '--import', import.meta.resolve('tsx'), path.resolve(ROOT, entry), ...(opts.args ?? [])], {
    cwd: opts.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir(), ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    proc,
    output: () => out,
    async stop(signal) {
      if (proc.exitCode === null) proc.kill(signal);
      await exited;
    },
  };
}

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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}

function writeDoc(body: string): void {
  const doc = fs.existsSync(DOC) ? fs.readFileSync(DOC, 'utf8') : '# Benchmarks\n';
  const start = doc.indexOf(MARK_START);
  const end = doc.indexOf(MARK_END);
  const next = start >= 0 && end > start ? doc.slice(0, start) + body + doc.slice(end + MARK_END.length) : `${doc.trimEnd()}\n\n${body}\n`;
  fs.writeFileSync(DOC, next);
}

const watchdog = setTimeout(() => {
  console.error('watchdog: the bench ran longer than 20 minutes');
  process.exit(1);
}, 20 * 60_000);
watchdog.unref();
main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
