import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { getRun } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { API_KEY, PROVIDER_KEY, agentDsl, type ChatTarget } from './chat-conformance.js';
import { clientsConformance } from './clients-conformance.js';

/** Third-party clients against embedded mode: one process, PGlite, the in-process bus. */
describe('third-party clients, embedded mode', () => {
  let runtime: Runtime;
  let fake: FakeModel;
  let target: ChatTarget;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-clients-'));

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'server: {host: 127.0.0.1, port: 0}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}}}}`,
      ].join('\n'),
    );
    runtime = await bootstrap({
      service: 'standalone',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'clients-embedded-master-key-0123456789' },
      cwd,
      logDestination: { write: () => {} },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    const { port } = await startStandalone(runtime);
    const baseURL = `http://127.0.0.1:${port}/api/v1`;
    const created = await fetch(`${baseURL}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agentDsl('conformance')),
    });
    if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${await created.text()}`);
    target = { baseURL, apiKey: API_KEY, fake, agentId: 'conformance', runStatus: async (id) => (await getRun(runtime.db.db, id))?.status };
  }, 180_000);

  afterAll(async () => {
    await runtime?.lifecycle.shutdown('test');
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  clientsConformance(() => target);
});
