import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { getRun } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { API_KEY, PROVIDER_KEY, agentDsl } from './chat-conformance.js';
import { OTHER_API_KEY, responsesConformance, type ResponsesTarget } from './responses-conformance.js';

/** The Responses API suite against embedded mode: one process, PGlite, the in-process bus. */
describe('responses API, embedded mode', () => {
  let runtime: Runtime;
  let fake: FakeModel;
  let target: ResponsesTarget;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-responses-'));

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'server: {host: 127.0.0.1, port: 0, request_timeout_ms: 1000}',
        'reliability: {relay_check_ms: 1000}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}, other: {name: Other, api_key: "${OTHER_API_KEY}"}}}}`,
      ].join('\n'),
    );
    runtime = await bootstrap({
      service: 'standalone',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'responses-embedded-master-key-0123456789' },
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
    target = {
      baseURL,
      apiKey: API_KEY,
      otherApiKey: OTHER_API_KEY,
      fake,
      agentId: 'conformance',
      runStatus: async (id) => (await getRun(runtime.db.db, id))?.status,
    };
  }, 60_000);

  afterAll(async () => {
    await runtime?.lifecycle.shutdown('test');
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  responsesConformance(() => target);
});
