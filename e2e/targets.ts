import { afterAll, beforeAll } from 'vitest';
import { getRun } from '@agentry/db';
import { startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { API_KEY, PROVIDER_KEY, agentDsl } from './chat-conformance.js';
import { OTHER_API_KEY, type ResponsesTarget } from './responses-conformance.js';
import { bootEmbedded, fakeModelConfig, type EmbeddedRuntime } from './harness.js';

/**
 * The Agentry a conformance suite talks to, started once per test file in either mode: the fake
 * provider, two `api` accounts (the suite's and another caller's) and the conformance agent.
 * Short request and relay-check bounds let the timeout cases finish quickly.
 */
const configLines = (fake: FakeModel): string[] => [
  'reliability: {relay_check_ms: 1000, resume_grace_ms: 500}',
  ...fakeModelConfig(fake, PROVIDER_KEY),
  `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}, other: {name: Other, api_key: "${OTHER_API_KEY}"}}}}`,
];

async function createAgent(baseURL: string): Promise<void> {
  const created = await fetch(`${baseURL}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl('conformance')) });
  if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${await created.text()}`);
}

const targetOf = (baseURL: string, fake: FakeModel, runStatus: ResponsesTarget['runStatus']): ResponsesTarget => ({
  baseURL,
  apiKey: API_KEY,
  otherApiKey: OTHER_API_KEY,
  fake,
  agentId: 'conformance',
  runStatus,
});

/** Embedded mode (one process, PGlite, the in-process bus) for the enclosing describe. */
export function embeddedTarget(name: string): () => ResponsesTarget {
  let embedded: EmbeddedRuntime | undefined;
  let fake: FakeModel | undefined;
  let target: ResponsesTarget | undefined;
  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    // 2 s, not 1: this server shares the test's event loop with PGlite's synchronous queries, and
    // under a loaded CI a request that arrived could be judged late (a 408 on a replay GET, twice).
    // The "not cut" test's stream (3 s) still outlasts it.
    embedded = await bootEmbedded(name, ['server: {host: 127.0.0.1, port: 0, request_timeout_ms: 2000}', ...configLines(fake)], { service: 'standalone' });
    const rt = embedded.runtime;
    const { port } = await startStandalone(rt);
    const baseURL = `http://127.0.0.1:${port}/api/v1`;
    await createAgent(baseURL);
    target = targetOf(baseURL, fake, async (id) => (await getRun(rt.db.db, id))?.status);
  }, 180_000);
  afterAll(async () => {
    await embedded?.stop();
    await fake?.close();
  });
  return () => target!;
}

/** Cluster mode (a gateway and two agent-workers as processes on real Postgres and Redis) for the enclosing describe. */
export function clusterTarget(): () => ResponsesTarget {
  let cluster: TestCluster | undefined;
  let fake: FakeModel | undefined;
  let target: ResponsesTarget | undefined;
  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    const c = (cluster = await startTestCluster({ workers: 2, configLines: ['server: {request_timeout_ms: 1000}', ...configLines(fake)] }));
    await createAgent(c.baseURL);
    target = targetOf(c.baseURL, fake, async (id) => (await getRun(c.db.handle.db, id))?.status);
  }, 240_000);
  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });
  return () => target!;
}
