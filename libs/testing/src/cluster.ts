import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { freePort, spawnService, type SpawnedService } from './process.js';
import { uniqueRedisPrefix } from './redis.js';
import { redisUrl } from './require-servers.js';

/** A cluster-mode deployment for a test: a fresh database, a Redis prefix, a gateway, workers. */
export interface TestCluster {
  db: TestDatabase;
  /** The environment every service of this cluster gets. */
  env: Record<string, string>;
  /** The configuration file every service reads. */
  configPath: string;
  /** `http://127.0.0.1:<port>/api/v1` of the gateway. */
  baseURL: string;
  processes: SpawnedService[];
  /** Starts one more agent-worker and waits until it consumes. */
  startWorker(): Promise<SpawnedService>;
  /** Stops every process (SIGKILL), drops the database and removes the folder. */
  stop(): Promise<void>;
}

/**
 * Starts a gateway and `workers` agent-workers as separate processes on real Postgres and Redis,
 * all reading one configuration file made of `configLines`.
 */
export async function startTestCluster(opts: { configLines: string[]; workers?: number }): Promise<TestCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cluster-'));
  const configPath = path.join(dir, 'config.yaml');
  fs.writeFileSync(configPath, opts.configLines.join('\n'));
  const db = await createTestDatabase();
  const port = await freePort();
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: redisUrl(),
    REDIS_PREFIX: uniqueRedisPrefix(),
    AGENTRY_SECRET_KEY: 'test-cluster-master-key-0123456789',
    HOST: '127.0.0.1',
    HEALTH_HOST: '127.0.0.1',
  };
  const processes: SpawnedService[] = [];
  const startWorker = async () => {
    const worker = spawnService('services/agent-worker/src/main.ts', { args: ['--config', configPath], env: { ...env, HEALTH_PORT: '0' } });
    processes.push(worker);
    await worker.waitForLine(/agent-worker started/, 40_000);
    return worker;
  };
  const gateway = spawnService('services/gateway/src/main.ts', { args: ['--config', configPath], env: { ...env, PORT: String(port) } });
  processes.push(gateway);
  await Promise.all([gateway.waitForLine(/gateway listening/, 40_000), ...Array.from({ length: opts.workers ?? 1 }, () => startWorker())]);
  return {
    db,
    env,
    configPath,
    baseURL: `http://127.0.0.1:${port}/api/v1`,
    processes,
    startWorker,
    stop: async () => {
      await Promise.all(processes.map((p) => p.stop('SIGKILL')));
      await db.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
