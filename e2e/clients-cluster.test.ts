import { afterAll, beforeAll } from 'vitest';
import { getRun } from '@agentry/db';
import { describeWithServers, startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';
import { API_KEY, PROVIDER_KEY, agentDsl, type ChatTarget } from './chat-conformance.js';
import { clientsConformance } from './clients-conformance.js';

/**
 * Third-party clients against cluster mode: the gateway and two agent-workers as separate
 * processes on real Postgres and Redis.
 */
describeWithServers('third-party clients, cluster mode (separate gateway and worker processes)', () => {
  let fake: FakeModel;
  let cluster: TestCluster;
  let target: ChatTarget;

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    cluster = await startTestCluster({
      workers: 2,
      configLines: [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}}}}`,
      ],
    });
    const { baseURL } = cluster;
    const created = await fetch(`${baseURL}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agentDsl('conformance')),
    });
    if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${await created.text()}`);
    target = { baseURL, apiKey: API_KEY, fake, agentId: 'conformance', runStatus: async (id) => (await getRun(cluster.db.handle.db, id))?.status };
  }, 240_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  clientsConformance(() => target);
});
