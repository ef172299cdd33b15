import { afterAll, beforeAll, expect, it } from 'vitest';
import { budgetCounter } from '@agentry/contracts';
import { describeWithServers, startFakeModel, startTestCluster, waitFor, type FakeModel, type TestCluster } from '@agentry/testing';
import { openaiErrorMessage } from './openai-error.js';

/**
 * Budgets in cluster mode: two gateway processes and a worker on one Redis prefix. The counts
 * of a principal's budget are Redis's, so requests spread over both gateways share one per-minute
 * budget, and the tokens the worker adds after a run on one gateway's request close the other
 * gateway to the account. Usage rows written by the worker show in either gateway's report.
 */
const RPM_KEY = 'rpm-key-0123456789abcdefghij';
const TOKENS_KEY = 'tokens-key-0123456789abcdefgh';
const BURST_KEY = 'burst-key-0123456789abcdefghi';

describeWithServers('usage and budgets across two gateways (cluster mode, Redis)', () => {
  let cluster: TestCluster;
  let fake: FakeModel;
  let gateways: string[];

  const chat = (gateway: number, key: string) =>
    fetch(`${gateways[gateway]}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'meter', messages: [{ role: 'user', content: 'hi' }] }),
    });

  beforeAll(async () => {
    fake = await startFakeModel();
    cluster = await startTestCluster({
      gateways: 2,
      workers: 1,
      configLines: [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        'channels:',
        '  api:',
        '    accounts:',
        `      rpm: {api_key: "${RPM_KEY}", budget: {requestsPerMinute: 3}}`,
        `      tokens: {api_key: "${TOKENS_KEY}", budget: {tokensPerDay: 10}}`,
        `      burst: {api_key: "${BURST_KEY}", budget: {tokensPerDay: 30}}`,
      ],
    });
    gateways = cluster.local.gatewayUrls;
    // Open mode: management routes need no login (chat still needs an api key, as keys exist).
    const agent = { ruleChain: { id: 'meter', name: 'meter' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] } };
    const res = await fetch(`${gateways[0]}/api/v1/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agent) });
    expect(res.status, await res.text()).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  it('requests per minute are counted once across both gateways', async () => {
    // Starts well inside a minute, so that every request falls in one window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    const minute = budgetCounter('requestsPerMinute', 'api:rpm');
    const codes = [];
    for (const gateway of [0, 1, 0]) codes.push((await chat(gateway, RPM_KEY)).status);
    const refused = await chat(1, RPM_KEY);
    expect([...codes, refused.status]).toEqual([200, 200, 200, 429]);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(openaiErrorMessage(await refused.json())).toContain(`requestsPerMinute budget of api:rpm (3 requests per minute) is spent; it resets at ${minute.resetsAt.toISOString()}`);
    expect((await chat(0, RPM_KEY)).status).toBe(429);
  });

  it("a run's tokens, added by the worker, close the day's budget on the other gateway", async () => {
    fake.script({ text: 'costly', usage: { prompt_tokens: 8, completion_tokens: 4 } });
    expect((await chat(0, TOKENS_KEY)).status).toBe(200);
    await waitFor(async () => (await chat(1, TOKENS_KEY)).status === 429, 10_000, 100);
    const refused = await chat(1, TOKENS_KEY);
    expect(openaiErrorMessage(await refused.json())).toContain('tokensPerDay budget of api:tokens (10 tokens per day) is spent');
    // The worker writes usage rows in batches (up to 25 ms after the call): the report may lag the counter.
    const tokensRow = async () => {
      const report = await fetch(`${gateways[1]}/api/v1/usage?groupBy=principal`);
      const { data } = (await report.json()) as { data: Array<{ key: string; promptTokens: number; completionTokens: number }> };
      return data.find((r) => r.key === 'api:tokens');
    };
    await waitFor(async () => (await tokensRow()) !== undefined, 5_000, 50);
    expect(await tokensRow()).toMatchObject({ promptTokens: 8, completionTokens: 4 });
  });

  it('20 parallel chats over both gateways spend at most the day and one call: the worker reserves each call in Redis', async () => {
    // Every call costs 10 and takes a moment; before, all 20 passed the gateways' check at once and spent 200.
    fake.script(...Array.from({ length: 20 }, () => ({ text: 'ok', delayMs: 30, usage: { prompt_tokens: 6, completion_tokens: 4 } })));
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(i % 2, BURST_KEY)));
    const codes = answers.map((r) => r.status);
    expect(codes.every((c) => c === 200 || c === 429), String(codes)).toBe(true);
    expect(codes.filter((c) => c === 429).length).toBeGreaterThan(0);
    const refused = answers.find((r) => r.status === 429)!;
    expect(openaiErrorMessage(await refused.json())).toContain('tokensPerDay budget of api:burst (30 tokens per day) is spent');
    const calls = codes.filter((c) => c === 200).length;
    const burstRow = async () => {
      const report = await fetch(`${gateways[0]}/api/v1/usage?groupBy=principal`);
      return ((await report.json()) as { data: Array<{ key: string; totalTokens: number; requests: number }> }).data.find((r) => r.key === 'api:burst');
    };
    await waitFor(async () => (await burstRow())?.requests === calls, 5_000, 50);
    expect((await burstRow())!.totalTokens).toBeLessThanOrEqual(30 + 10);
    fake.reset();
  });
});
