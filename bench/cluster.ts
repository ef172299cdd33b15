/**
 * What the cluster benches share (bench/throughput.ts, bench/scale-out.ts): the configuration a
 * bench cluster runs with, its one agent, a cluster of G gateways and W agent-workers on a
 * throwaway database and a Redis server of its own (behind a round-robin proxy process when there
 * is more than one gateway), and the closed-loop non-streamed load.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort } from '@agentry/testing';
import { BENCH_POSTGRES_URL, createBenchDatabase, errorText, onCleanup, pct, sleep, sortNum, spawnEntry, startPrivateRedis, waitForHttp, type Child } from './lib.js';

export const START_TIMEOUT_MS = 90_000;

export interface RequestSpec {
  port: number;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface BenchKeys {
  /** The API key of the one account the load uses. */
  account: string;
  /** The key the services send the fake provider. */
  provider: string;
}

export function benchKeys(): BenchKeys {
  return { account: `sk-bench-${randomBytes(16).toString('hex')}`, provider: `sk-bench-provider-${randomBytes(8).toString('hex')}` };
}

/** Writes `<dir>/config.yaml` for a bench service talking to the fake on `fakePort`; returns its path. */
export function writeBenchConfig(dir: string, fakePort: number, keys: BenchKeys): string {
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    [
      // warn: a log line per request would measure pino, not the path.
      'logging: {level: warn}',
      `server: {host: 127.0.0.1}`,
      `data: {root_dir: "${path.join(dir, 'data')}"}`,
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "http://127.0.0.1:${fakePort}/v1", api_key: "${keys.provider}", model: fake-model}}`,
      `channels: {api: {accounts: {bench: {name: Bench, api_key: "${keys.account}"}}}}`,
      // One key sends every request: the per-credential chat limit (600 a minute by default) is off.
      'security: {rateLimit: {chat: {requests: 0}}}',
      '',
    ].join('\n'),
  );
  return config;
}

/** Creates the agent `bench` (one ai/agent node on the fake) through the API at `port`. */
export async function createBenchAgent(port: number): Promise<void> {
  const res = await fetchWithCause(`http://127.0.0.1:${port}/api/v1/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'bench', name: 'Bench' },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    }),
    signal: AbortSignal.timeout(10_000),
  });
  if (res.status !== 201) throw new Error(`creating the agent: HTTP ${res.status} ${await res.text()}`);
}

/** A chat with the agent `bench` through the API at `port`. */
export function agentryRequest(port: number, keys: BenchKeys, stream = false): RequestSpec {
  return {
    port,
    path: '/api/v1/chat/completions',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.account}` },
    body: JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream }),
  };
}

/** fetch, whose bare "fetch failed" gets the network error under it (ECONNRESET, ...) appended. */
async function fetchWithCause(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
    throw new Error(`${init.method ?? 'GET'} ${url}: ${errorText(err)}${cause}`);
  }
}

// ---------------------------------------------------------------------------------------------
// A cluster of G gateways and W workers

export interface Cluster {
  /** Where clients send requests: the one gateway, or the proxy in front of several. */
  port: number;
  gateways: Child[];
  workers: Child[];
  /** The round-robin proxy process (more than one gateway only). */
  proxy?: Child;
  /** The cluster's own database (its name) and Redis server. */
  database: string;
  redis: { url: string; pid: number };
  stop(): Promise<void>;
}

export interface ClusterOptions {
  gateways: number;
  workers: number;
  fakePort: number;
  keys: BenchKeys;
  /** A folder for the cluster's configuration and data. */
  work: string;
  /** Prefix of the processes' names (log files, RSS columns). */
  name: string;
  runtime: 'node' | 'tsx';
  /** Another built tree to run the services from (bench/ab.ts's prepared commits); default this one. */
  root?: string;
}

/**
 * Starts G gateways and W agent-workers on a throwaway migrated database and a redis-server of
 * the cluster's own (so that `INFO commandstats` counts only its commands and its CPU is the
 * cluster's alone), waits until every process is ready and creates the agent `bench`. With more
 * than one gateway, libs/testing's round-robin proxy runs in a process of its own in front of
 * them (its CPU is then neither the load generator's nor a gateway's).
 */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const dir = fs.mkdtempSync(path.join(o.work, `${o.name}-`));
  const config = writeBenchConfig(dir, o.fakePort, o.keys);
  const local: Array<() => Promise<void>> = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // Processes in parallel first (they hold the database and Redis), then the backends.
    const procs = local.splice(2);
    await Promise.all(procs.map((f) => f().catch((err: unknown) => console.error(`stopping ${o.name}: ${errorText(err)}`))));
    while (local.length > 0) {
      try {
        await local.pop()!();
      } catch (err) {
        console.error(`stopping ${o.name}: ${errorText(err)}`);
      }
    }
  };
  // Registered globally too, so that an error or a signal mid-start still cleans up.
  onCleanup(o.name, stop);
  const db = await createBenchDatabase(BENCH_POSTGRES_URL);
  local.push(db.drop);
  const redis = await startPrivateRedis(await freePort());
  local.push(() => redis.stop());
  const gateways: Child[] = [];
  const workers: Child[] = [];
  let proxy: Child | undefined;
  try {
    const prefix = `agentry-bench-${randomBytes(5).toString('hex')}`;
    const env = { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_PREFIX: prefix, AGENTRY_SECRET_KEY: randomBytes(32).toString('base64'), HOST: '127.0.0.1', HEALTH_HOST: '127.0.0.1' };
    const ready: Promise<void>[] = [];
    const gatewayPorts: number[] = [];
    for (let i = 0; i < o.gateways; i++) {
      const port = await freePort();
      const name = o.gateways === 1 ? `${o.name}-gateway` : `${o.name}-gateway${i + 1}`;
      const g = spawnEntry(name, 'services/gateway/src/main.ts', { args: ['--config', config], env: { ...env, PORT: String(port) }, cwd: dir, runtime: o.runtime, ...(o.root ? { root: o.root } : {}) });
      local.push(() => g.stop());
      gateways.push(g);
      gatewayPorts.push(port);
      ready.push(waitForHttp(`http://127.0.0.1:${port}/ready`, START_TIMEOUT_MS, g));
    }
    for (let i = 0; i < o.workers; i++) {
      const health = await freePort();
      const name = o.workers === 1 ? `${o.name}-worker` : `${o.name}-worker${i + 1}`;
      const w = spawnEntry(name, 'services/agent-worker/src/main.ts', { args: ['--config', config], env: { ...env, HEALTH_PORT: String(health) }, cwd: dir, runtime: o.runtime, ...(o.root ? { root: o.root } : {}) });
      local.push(() => w.stop());
      workers.push(w);
      ready.push(waitForHttp(`http://127.0.0.1:${health}/ready`, START_TIMEOUT_MS, w));
    }
    await Promise.all(ready);
    // Straight at the first gateway: every gateway reads agents from the shared database.
    await createBenchAgent(gatewayPorts[0]!);
    let port = gatewayPorts[0]!;
    if (o.gateways > 1) {
      port = await freePort();
      const p = spawnEntry(`${o.name}-proxy`, 'bench/rr-proxy.ts', { args: [`--port=${port}`, ...gatewayPorts.map((gp) => `http://127.0.0.1:${gp}`)], cwd: dir });
      local.push(() => p.stop());
      proxy = p;
      await p.waitForLog(/round-robin proxy listening/, START_TIMEOUT_MS);
    }
    return { port, gateways, workers, ...(proxy ? { proxy } : {}), database: db.name, redis: { url: redis.url, pid: redis.pid }, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Closed-loop non-streamed load

export interface ClosedLoopResult<T> {
  connections: number;
  /** Answers accepted by `ok` within the measured window. */
  requests: number;
  errors: number;
  errorSample?: string;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** What the probe returned for the measured window. */
  probe: T;
}

/**
 * C keep-alive connections, each sending the next request when the last answered, for
 * `warmupS` then `measureS`; `probe` starts when the measured window does and is stopped when it
 * ends (before the loops drain). An error is a failed request or an answer `ok` refuses.
 */
export async function closedLoop<T>(
  spec: RequestSpec,
  connections: number,
  o: { warmupS: number; measureS: number; ok: (status: number | undefined, body: string) => boolean; probe: () => { stop(): T } },
): Promise<ClosedLoopResult<T>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let phase: 'warmup' | 'measure' | 'stop' = 'warmup';
  const latencies: number[] = [];
  let errors = 0;
  let errorSample: string | undefined;
  const once = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request({ host: '127.0.0.1', port: spec.port, path: spec.path, method: 'POST', agent, headers: spec.headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          if (phase === 'measure') {
            if (o.ok(res.statusCode, body)) latencies.push(performance.now() - t0);
            else {
              errors++;
              errorSample ??= `HTTP ${res.statusCode}: ${body.slice(0, 200)}`;
            }
          }
          resolve();
        });
        res.on('error', () => resolve());
      });
      req.on('error', (err) => {
        if (phase === 'measure') {
          errors++;
          errorSample ??= err.message;
        }
        resolve();
      });
      req.setTimeout(30_000, () => req.destroy(new Error('no answer within 30 s')));
      req.end(spec.body);
    });
  const loop = async () => {
    while (phase !== 'stop') await once();
  };
  const loops = Array.from({ length: connections }, loop);
  await sleep(o.warmupS * 1000);
  phase = 'measure';
  const probe = o.probe();
  const t0 = performance.now();
  await sleep(o.measureS * 1000);
  const seconds = (performance.now() - t0) / 1000;
  phase = 'stop';
  const probed = probe.stop();
  await Promise.all(loops);
  agent.destroy();
  const sorted = sortNum(latencies);
  return {
    connections,
    requests: latencies.length,
    errors,
    ...(errorSample ? { errorSample } : {}),
    seconds,
    rps: latencies.length / seconds,
    p50: pct(sorted, 50),
    p99: pct(sorted, 99),
    probe: probed,
  };
}

/** `n` requests over `c` keep-alive connections; resolves with how many `ok` accepted. */
export async function sendN(spec: RequestSpec, n: number, c: number, ok: (status: number | undefined, body: string) => boolean): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: c });
  let left = n;
  let good = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: spec.port, path: spec.path, method: 'POST', agent, headers: spec.headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          if (ok(res.statusCode, body)) good++;
          resolve();
        });
      });
      req.on('error', () => resolve());
      req.end(spec.body);
    });
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (left-- > 0) await one();
    }),
  );
  agent.destroy();
  return good;
}
