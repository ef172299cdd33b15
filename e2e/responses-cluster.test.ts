import { afterAll, beforeAll } from 'vitest';
import { getRun } from '@agentry/db';
import { describeWithServers, startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';
import { API_KEY, PROVIDER_KEY, agentDsl } from './chat-conformance.js';
import { OTHER_API_KEY, responsesConformance, type ResponsesTarget } from './responses-conformance.js';

/**
 * The same Responses API suite against cluster mode: the gateway and two agent-workers as
 * separate processes on real Postgres and Redis.
 */
describeWithServers('responses API, cluster mode (separate gateway and worker processes)', () => {
  let fake: FakeModel;
  let cluster: TestCluster;
  let target: ResponsesTarget;

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    cluster = await startTestCluster({
      workers: 2,
      configLines: [
        'reliability: {relay_check_ms: 1000}',
        'server: {request_timeout_ms: 1000}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}, other: {name: Other, api_key: "${OTHER_API_KEY}"}}}}`,
      ],
    });
    const { baseURL } = cluster;
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
      runStatus: async (id) => (await getRun(cluster.db.handle.db, id))?.status,
    };
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  responsesConformance(() => target);
});
