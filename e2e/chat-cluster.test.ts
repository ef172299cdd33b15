import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { getRun } from '@agentry/db';
import {
  createTestDatabase,
  describeWithServers,
  freePort,
  redisUrl,
  spawnService,
  startFakeModel,
  uniqueRedisPrefix,
  type FakeModel,
  type SpawnedService,
  type TestDatabase,
} from '@agentry/testing';
import { API_KEY, PROVIDER_KEY, agentDsl, chatConformance, sessionConformance, type ChatTarget } from './chat-conformance.js';

/**
 * The same conformance suite against cluster mode: the gateway and two agent-workers as
 * separate processes on real Postgres and Redis.
 */
describeWithServers('chat completions, cluster mode (separate gateway and worker processes)', () => {
  const processes: SpawnedService[] = [];
  let fake: FakeModel;
  let db: TestDatabase;
  let target: ChatTarget;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-chat-cluster-'));

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    db = await createTestDatabase();
    const config = path.join(cwd, 'config.yaml');
    fs.writeFileSync(
      config,
      [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}}}}`,
      ].join('\n'),
    );
    const port = await freePort();
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl(),
      REDIS_PREFIX: uniqueRedisPrefix(),
      AGENTRY_SECRET_KEY: 'chat-cluster-master-key-0123456789',
      HOST: '127.0.0.1',
      HEALTH_HOST: '127.0.0.1',
    };
    const gateway = spawnService('services/gateway/src/main.ts', { args: ['--config', config], env: { ...env, PORT: String(port) } });
    processes.push(gateway);
    for (let i = 0; i < 2; i++) {
      processes.push(spawnService('services/agent-worker/src/main.ts', { args: ['--config', config], env: { ...env, HEALTH_PORT: '0' } }));
    }
    await Promise.all([gateway.waitForLine(/gateway listening/, 40_000), ...processes.slice(1).map((p) => p.waitForLine(/agent-worker started/, 40_000))]);
    const baseURL = `http://127.0.0.1:${port}/api/v1`;
    const created = await fetch(`${baseURL}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agentDsl('conformance')),
    });
    if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${await created.text()}`);
    target = { baseURL, apiKey: API_KEY, fake, agentId: 'conformance', runStatus: async (id) => (await getRun(db.handle.db, id))?.status };
  }, 90_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await fake?.close();
    await db?.drop();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  chatConformance(() => target);
  sessionConformance(() => target);
});
