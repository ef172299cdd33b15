import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { freePort, repoRoot, spawnService, type SpawnedService } from './process.js';
import { uniqueRedisPrefix } from './redis.js';
import { redisUrl } from './require-servers.js';
import { startRoundRobinProxy, type RoundRobinProxy } from './round-robin-proxy.js';
import { assertNotFastTier } from './tiers.js';

export type ClusterRole = 'gateway' | 'worker' | 'scheduler' | 'connector';

const ENTRY: Record<ClusterRole, { entry: string; ready: RegExp }> = {
  gateway: { entry: 'services/gateway/src/main.ts', ready: /gateway listening/ },
  worker: { entry: 'services/agent-worker/src/main.ts', ready: /agent-worker started/ },
  scheduler: { entry: 'services/scheduler/src/main.ts', ready: /scheduler started/ },
  connector: { entry: 'services/channel-connector/src/main.ts', ready: /channel-connector started/ },
};

export interface LocalClusterOptions {
  configPath: string;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  secretKey: string;
  gateways?: number;
  workers?: number;
  schedulers?: number;
  connectors?: number;
  /** A round-robin proxy in front of the gateways (the ingress); off by default. */
  proxy?: { host?: string; port?: number } | false;
  /** More environment for every process. */
  env?: Record<string, string>;
  /** Each process's output also goes here, prefixed with its name (the `npm run cluster` console). */
  echo?: (name: string, line: string) => void;
  /** `tsx` (default, tests): the sources; `compiled`: dist/, built first when stale (`npm run cluster`). */
  runtime?: 'tsx' | 'compiled';
}

export interface LocalCluster {
  /** The proxy's URL, else the first gateway's (no `/api/v1`). */
  url: string;
  gatewayUrls: string[];
  proxy: RoundRobinProxy | undefined;
  /** Every process, in start order. */
  processes: SpawnedService[];
  byRole: Record<ClusterRole, SpawnedService[]>;
  /** Starts one more process of a role and waits until it is ready. */
  start(role: ClusterRole): Promise<SpawnedService>;
  /** Where a process answers `/ready`: a gateway on its port, the others on their probe port. */
  readyUrl(svc: SpawnedService): string;
  /** The `/ready` URLs of the processes that have not exited. */
  readyUrls(): string[];
  /** Stops every process (SIGTERM, or the given signal) and the proxy. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts the services of a cluster-mode deployment as separate processes on loopback: gateways
 * (each on its own free port), agent-workers, schedulers and channel-connectors, all on the same
 * Postgres, Redis prefix, master key and configuration file, optionally behind a round-robin
 * proxy. The database must be migrated (services wait for migrations in cluster mode).
 */
export async function startLocalCluster(opts: LocalClusterOptions): Promise<LocalCluster> {
  assertNotFastTier('startLocalCluster()');
  const env: Record<string, string> = {
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: opts.redisUrl,
    REDIS_PREFIX: opts.redisPrefix,
    AGENTRY_SECRET_KEY: opts.secretKey,
    HOST: '127.0.0.1',
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
    ...opts.env,
  };
  if (opts.runtime === 'compiled') buildEntries(Object.values(ENTRY).map((e) => e.entry));
  const processes: SpawnedService[] = [];
  const byRole: Record<ClusterRole, SpawnedService[]> = { gateway: [], worker: [], scheduler: [], connector: [] };
  const gatewayUrls: string[] = [];
  const readyUrls = new Map<SpawnedService, string>();

  const start = async (role: ClusterRole, attempt = 1): Promise<SpawnedService> => {
    const port = role === 'gateway' ? await freePort() : undefined;
    const name = `${role}-${byRole[role].length + 1}`;
    let partial = '';
    const onOutput = opts.echo
      ? (chunk: string) => {
          const lines = (partial + chunk).split('\n');
          partial = lines.pop() ?? '';
          for (const l of lines) opts.echo!(name, l);
        }
      : undefined;
    const svc = spawnService(ENTRY[role].entry, {
      args: ['--config', opts.configPath],
      env: { ...env, ...(port ? { PORT: String(port) } : {}) },
      ...(onOutput ? { onOutput } : {}),
      ...(opts.runtime ? { runtime: opts.runtime } : {}),
    });
    processes.push(svc);
    byRole[role].push(svc);
    if (!(await readyOrPortTaken(svc, ENTRY[role].ready, attempt, [processes, byRole[role]]))) return start(role, attempt + 1);
    if (port) {
      gatewayUrls.push(`http://127.0.0.1:${port}`);
      readyUrls.set(svc, `http://127.0.0.1:${port}/ready`);
    } else {
      const probes = JSON.parse(await svc.waitForLine(/"msg":"probes listening"/, 30_000)) as { port: number };
      readyUrls.set(svc, `http://127.0.0.1:${probes.port}/ready`);
    }
    return svc;
  };

  const counts: Array<[ClusterRole, number]> = [
    ['gateway', opts.gateways ?? 1],
    ['worker', opts.workers ?? 1],
    ['scheduler', opts.schedulers ?? 0],
    ['connector', opts.connectors ?? 0],
  ];
  try {
    await Promise.all(counts.flatMap(([role, n]) => Array.from({ length: n }, () => start(role))));
  } catch (err) {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    throw err;
  }
  const proxy = opts.proxy ? await startRoundRobinProxy(gatewayUrls, opts.proxy) : undefined;
  return {
    url: proxy?.url ?? gatewayUrls[0]!,
    gatewayUrls,
    proxy,
    processes,
    byRole,
    start,
    readyUrl: (svc) => {
      const url = readyUrls.get(svc);
      if (!url) throw new Error('not a process of this cluster');
      return url;
    },
    readyUrls: () => processes.filter((p) => p.proc.exitCode === null && p.proc.signalCode === null).map((p) => readyUrls.get(p)!),
    stop: async (signal = 'SIGTERM') => {
      await proxy?.close();
      await Promise.all(processes.map((p) => p.stop(signal)));
    },
  };
}

/** A cluster-mode deployment for a test: a fresh database, a Redis prefix, the services as processes. */
export interface TestCluster {
  db: TestDatabase;
  /** The environment every service of this cluster gets. */
  env: Record<string, string>;
  /** The configuration file every service reads. */
  configPath: string;
  /** `<proxy or first gateway>/api/v1`. */
  baseURL: string;
  processes: SpawnedService[];
  local: LocalCluster;
  /** Starts one more agent-worker and waits until it consumes. */
  startWorker(): Promise<SpawnedService>;
  /** Stops every process (SIGKILL), drops the database (unless the caller's) and removes the folder. */
  stop(): Promise<void>;
}

/**
 * Starts a cluster-mode deployment on a fresh (migrated) database and its own Redis prefix:
 * `gateways` (default 1), `workers` (default 1), `schedulers` and `connectors` (default 0) as
 * separate processes, all reading one configuration file made of `configLines`; `proxy` puts a
 * round-robin proxy in front of the gateways (then `baseURL` points at it).
 */
export async function startTestCluster(opts: {
  configLines: string[];
  gateways?: number;
  workers?: number;
  schedulers?: number;
  connectors?: number;
  proxy?: boolean;
  env?: Record<string, string>;
  /** A database of the caller's (migrated; the caller drops it) instead of a fresh one on the shared server. */
  db?: TestDatabase;
  /** Another Redis than the shared one (its own prefix is still used). */
  redisUrl?: string;
}): Promise<TestCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cluster-'));
  const configPath = path.join(dir, 'config.yaml');
  fs.writeFileSync(configPath, opts.configLines.join('\n'));
  const ownDb = !opts.db;
  const db = opts.db ?? (await createTestDatabase());
  const base = {
    databaseUrl: db.url,
    redisUrl: opts.redisUrl ?? redisUrl(),
    redisPrefix: uniqueRedisPrefix(),
    secretKey: 'test-cluster-master-key-0123456789',
  };
  let local: LocalCluster;
  try {
    local = await startLocalCluster({
      configPath,
      ...base,
      gateways: opts.gateways ?? 1,
      workers: opts.workers ?? 1,
      schedulers: opts.schedulers ?? 0,
      connectors: opts.connectors ?? 0,
      proxy: opts.proxy ? {} : false,
      ...(opts.env ? { env: opts.env } : {}),
    });
  } catch (err) {
    if (ownDb) await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    db,
    env: {
      DATABASE_URL: base.databaseUrl,
      REDIS_URL: base.redisUrl,
      REDIS_PREFIX: base.redisPrefix,
      AGENTRY_SECRET_KEY: base.secretKey,
      HOST: '127.0.0.1',
      HEALTH_HOST: '127.0.0.1',
      ...opts.env,
    },
    configPath,
    baseURL: `${local.url}/api/v1`,
    processes: local.processes,
    local,
    startWorker: () => local.start('worker'),
    stop: async () => {
      await local.stop('SIGKILL');
      if (ownDb) await db.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Builds what is stale once, before processes that would otherwise each build it start together. */
export function buildEntries(entries: string[]): void {
  const res = spawnSync(process.execPath, [path.join(repoRoot, 'scripts/start.mjs'), '--build-only', ...entries], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  if (res.status !== 0) throw new Error(`building ${entries.join(', ')} failed (exit ${res.status ?? res.signal})`);
}

/**
 * Waits for the service's ready line. A port free a moment ago can be taken before the gateway
 * binds it (another test file's server on a busy box): that gateway exits with EADDRINUSE, is
 * dropped from `lists` and `false` says to start it again on another port (3 tries in all).
 */
async function readyOrPortTaken(svc: SpawnedService, ready: RegExp, attempt: number, lists: SpawnedService[][]): Promise<boolean> {
  try {
    await svc.waitForLine(ready, 60_000);
    return true;
  } catch (err) {
    if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    for (const list of lists) list.splice(list.indexOf(svc), 1);
    return false;
  }
}
