import { afterAll, beforeAll, expect, it } from 'vitest';
import OpenAI from 'openai';
import { describeWithServers, startFakeModel, startTestCluster, waitFor, type FakeModel, type TestCluster } from '@agentry/testing';

/**
 * The deployment as it runs on Kubernetes, on this machine: two gateways behind a round-robin
 * proxy (the ingress), two agent-workers, real Postgres and Redis, each service its own process.
 */
const KEY = 'sk-cluster-load-key-0123456789abcdef';

describeWithServers('a multi-process cluster behind a round-robin proxy', () => {
  let fake: FakeModel;
  let cluster: TestCluster;
  let base = '';

  beforeAll(async () => {
    fake = await startFakeModel();
    cluster = await startTestCluster({
      gateways: 2,
      workers: 2,
      proxy: true,
      configLines: [
        // One run per worker at a time, so concurrent chats must spread over both workers.
        'worker: {concurrency: 1, stall_timeout_ms: 2000}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}, spare: {base_url: "${fake.url}", model: fake-model}}`,
        `channels: {api: {accounts: {load: {api_key: "${KEY}"}}}}`,
      ],
    });
    base = cluster.baseURL;
    const created = await fetch(`${base}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ruleChain: { id: 'spread', name: 'Spread' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] } }),
    });
    expect(created.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  const gateway = (i: number) => `${cluster.local.gatewayUrls[i]}/api/v1`;
  const workerRuns = (i: number) => (cluster.local.byRole.worker[i]!.output().match(/"msg":"run succeeded"/g) ?? []).length;

  it('spreads streamed chats over both gateways and both workers, every stream whole and in order', async () => {
    fake.reset();
    const client = new OpenAI({ baseURL: base, apiKey: KEY });
    const before = [workerRuns(0), workerRuns(1)];
    const proxied = cluster.local.proxy!.counts();
    const words = (i: number) => Array.from({ length: 12 }, (_, k) => `w${i}.${k} `);
    const answers = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        fake.script({ text: words(i), chunkDelayMs: 40 });
        const stream = await client.chat.completions.create({ model: 'spread', stream: true, messages: [{ role: 'user', content: `chat ${i}` }] });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
        return text;
      }),
    );
    // Scripted replies go to requests in arrival order; every stream got one whole script.
    const expected = Array.from({ length: 6 }, (_, i) => words(i).join(''));
    expect([...answers].sort()).toEqual([...expected].sort());
    const after = cluster.local.proxy!.counts();
    for (const url of cluster.local.gatewayUrls) expect(after[url]! - proxied[url]!, url).toBeGreaterThanOrEqual(2);
    await waitFor(async () => workerRuns(0) + workerRuns(1) - before[0]! - before[1]! >= 6, 10_000);
    expect(workerRuns(0) - before[0]!).toBeGreaterThan(0);
    expect(workerRuns(1) - before[1]!).toBeGreaterThan(0);
  });

  it('a configuration change and a new API key on one gateway are seen by the other at once', async () => {
    const put = await fetch(`${gateway(0)}/config`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ models: { default_provider: 'spare' } }),
    });
    expect(put.status, await put.text()).toBe(200);
    await waitFor(async () => ((await (await fetch(`${gateway(1)}/config`)).json()) as { models: { default_provider: string } }).models.default_provider === 'spare', 1_000, 25);

    const created = await fetch(`${gateway(0)}/channels/api/accounts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'ci' }) });
    expect(created.status).toBe(201);
    const { apiKey } = (await created.json()) as { apiKey: string };
    const status = await waitFor(async () => {
      const res = await fetch(`${gateway(1)}/models`, { headers: { authorization: `Bearer ${apiKey}` } });
      return res.status === 200 ? res.status : undefined;
    }, 1_000, 25);
    expect(status).toBe(200);
    expect((await fetch(`${gateway(1)}/models`)).status).toBe(401);
    await fetch(`${gateway(1)}/channels/api/accounts/ci`, { method: 'DELETE' });
  });

  it('a worker killed with SIGKILL mid-run ends its client cleanly within 15 s', async () => {
    fake.reset();
    const index = fake.requests.length;
    fake.script({ hang: true }, { text: 'answered after the takeover' });
    const started = Date.now();
    const pending = fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'spread', messages: [{ role: 'user', content: 'who takes over?' }] }),
    });
    await fake.waitForRequest(index + 1, 10_000);
    // The worker that logged the run's start is the one to kill.
    const runWorker = await waitFor(async () => cluster.local.byRole.worker.find((w) => lastStartedAfter(w, started)), 5_000);
    await runWorker.stop('SIGKILL');
    const res = await pending;
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(15_000);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('answered after the takeover');
  }, 30_000);
});

/** True when the worker's latest `run started` line was written after `since` (ms since the epoch). */
function lastStartedAfter(worker: { output(): string }, since: number): boolean {
  const line = worker
    .output()
    .split('\n')
    .filter((l) => l.includes('"msg":"run started"'))
    .at(-1);
  if (!line) return false;
  return (JSON.parse(line) as { time: number }).time >= since;
}
