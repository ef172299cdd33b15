import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateTokens } from '@agentry/engine';
import { describeWithServers, startFakeModel, startTestCluster, waitFor, type FakeModel, type FakeRequest, type TestCluster } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { bootEmbedded, type EmbeddedRuntime } from './harness.js';

/**
 * Context compaction with the fake model and a small `context_window` (fake-model is unknown to
 * the tokenizer, so tokens are the 4-characters estimate the test can compute too): a long
 * session keeps answering, the model receives the summary plus the recent turns within budget,
 * the originals stay in the messages API marked compacted, a failed summary call falls back to
 * the sliding window, and `POST /sessions/{id}/compact` forces it. Embedded and cluster mode.
 */
const CONTEXT_WINDOW = 8000;
const PERCENT = 50;
const BUDGET = (CONTEXT_WINDOW * PERCENT) / 100;
const AGENT = 'compactor';
/** The summary request is told apart by its instructions. */
const isSummaryCall = (r: FakeRequest) => String(r.body.messages[0]?.content ?? '').startsWith('You compact a conversation');

interface Target {
  baseURL: string;
  fake: FakeModel;
  /** Summary calls answer 400 while set. */
  failSummaries: { on: boolean };
}

const configLines = (fake: FakeModel) => [
  'models:',
  '  default_provider: fake',
  `  providers: {fake: {base_url: "${fake.url}", model: fake-model, models: [{name: fake-model, context_window: ${CONTEXT_WINDOW}}]}}`,
];

/** A model that summarises into a short marked text (or fails, when told) and otherwise answers with 1800 characters. */
function startModel(failSummaries: { on: boolean }): Promise<FakeModel> {
  let summaries = 0;
  return startFakeModel({
    defaultReply: (r) => {
      if (!isSummaryCall(r)) return { text: `answer ${r.index} ${'a'.repeat(1800)}` };
      return failSummaries.on ? { status: 400, body: 'summaries are broken today' } : { text: `SUMMARY-${++summaries}: the user asked many long questions.` };
    },
  });
}

async function createAgent(baseURL: string): Promise<void> {
  const res = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: AGENT, name: AGENT },
      metadata: {
        nodes: [
          {
            id: 'agent',
            type: 'ai/agent',
            configuration: { provider: 'fake', systemPrompt: 'Be brief.', compaction: { keepRecentCount: 4, minMessagesToCompact: 6, targetTokensPercent: PERCENT } },
          },
        ],
        connections: [],
      },
    }),
  });
  if (res.status !== 201) throw new Error(`create agent: ${res.status} ${await res.text()}`);
}

async function chat(t: Target, sessionId: string, content: string): Promise<string> {
  const res = await fetch(`${t.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: AGENT, sessionId, messages: [{ role: 'user', content }] }),
  });
  const body = (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: string };
  if (res.status !== 200) throw new Error(`chat: ${res.status} ${JSON.stringify(body)}`);
  return body.choices![0]!.message.content;
}

async function sessionIdOf(t: Target, key: string): Promise<string> {
  const res = await fetch(`${t.baseURL}/sessions/-/messages?agentId=${AGENT}&sessionKey=${key}`);
  expect(res.status).toBe(200);
  const list = (await (await fetch(`${t.baseURL}/sessions?agentId=${AGENT}&size=100`)).json()) as { data: Array<{ id: string; sessionKey: string }> };
  return list.data.find((s) => s.sessionKey === key)!.id;
}

type Msg = { role: string; content: string; compactedAt?: string };
const messagesOf = async (t: Target, id: string) => (await (await fetch(`${t.baseURL}/sessions/${id}/messages`)).json()) as Msg[];
/** The tokens the worker counted for a request (estimate: 4 characters a token, 4 per message, 3 to prime). */
const tokensOf = (r: FakeRequest) => r.body.messages.reduce((n, m) => n + 4 + estimateTokens(String(m.content ?? '')), 3);
/** Model calls recorded as kind `compaction` (`run_usage`). */
async function compactionUsage(t: Target): Promise<number> {
  const report = (await (await fetch(`${t.baseURL}/usage?groupBy=kind`)).json()) as { data: Array<{ key: string; requests: number }> };
  return report.data.find((r) => r.key === 'compaction')?.requests ?? 0;
}
const question = (i: number) => `question ${i} ${'q'.repeat(1800)}`;

function compactionConformance(target: () => Target): void {
  it('a long session keeps answering with the summary and the recent turns within budget; the originals stay, marked', async () => {
    const t = target();
    t.fake.reset();
    for (let i = 1; i <= 10; i++) expect(await chat(t, 'long', question(i))).toMatch(/^answer /);
    const turns = t.fake.requests.filter((r) => !isSummaryCall(r));
    expect(turns).toHaveLength(10);
    for (const r of turns) expect(tokensOf(r)).toBeLessThanOrEqual(BUDGET);
    const summaryCalls = t.fake.requests.filter(isSummaryCall);
    expect(summaryCalls.length).toBeGreaterThan(1);
    // A later summary folds in the one before it, so nothing summarised is lost.
    expect(String(summaryCalls[1]!.body.messages[1]!.content)).toMatch(/^Summary of what came before:\nSUMMARY-1:/);
    const last = turns.at(-1)!.body.messages;
    // The summary ends the system message; the newest stored messages follow as they were, then the new question.
    expect(String(last[0]!.content)).toMatch(/SUMMARY-\d+/);
    expect(String(last.at(-1)!.content)).toBe(question(10));
    expect(String(last.at(-2)!.content)).toMatch(/^answer /);
    expect(last.some((m) => m.content === question(1))).toBe(false);
    const stored = await messagesOf(t, await sessionIdOf(t, 'long'));
    expect(stored).toHaveLength(20);
    expect(stored[0]!.content).toBe(question(1));
    expect(stored[0]!.compactedAt).toEqual(expect.any(String));
    expect(stored.at(-1)!.compactedAt).toBeUndefined();
    // The summary calls spend and show in usage as what they were: kind compaction (issue 35 F).
    await waitFor(async () => (await compactionUsage(t)) === summaryCalls.length, 5000, 20);
  });

  it('a failed summary call leaves the session answering: the oldest turns are left out instead', async () => {
    const t = target();
    t.fake.reset();
    t.failSummaries.on = true;
    try {
      for (let i = 1; i <= 6; i++) expect(await chat(t, 'broken', question(i))).toMatch(/^answer /);
    } finally {
      t.failSummaries.on = false;
    }
    const turns = t.fake.requests.filter((r) => !isSummaryCall(r));
    expect(turns).toHaveLength(6);
    expect(t.fake.requests.filter(isSummaryCall).length).toBeGreaterThan(0);
    for (const r of turns) expect(tokensOf(r)).toBeLessThanOrEqual(BUDGET);
    const last = turns.at(-1)!.body.messages;
    expect(String(last[0]!.content)).not.toMatch(/SUMMARY/);
    expect(last.some((m) => m.content === question(1))).toBe(false);
    expect(String(last.at(-1)!.content)).toBe(question(6));
    const stored = await messagesOf(t, await sessionIdOf(t, 'broken'));
    expect(stored).toHaveLength(12);
    expect(stored.filter((m) => m.compactedAt)).toHaveLength(0);
  });

  it('POST /sessions/{id}/compact summarises all but the recent messages; the next turn gets the summary', async () => {
    const t = target();
    for (let i = 1; i <= 3; i++) await chat(t, 'forced', `short ${i}`);
    const id = await sessionIdOf(t, 'forced');
    t.fake.reset();
    const usageBefore = await compactionUsage(t);
    const res = await fetch(`${t.baseURL}/sessions/${id}/compact`, { method: 'POST' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { compacted: number; summary: string };
    expect(body).toEqual({ compacted: 2, summary: expect.stringMatching(/^SUMMARY-\d+/) });
    expect(t.fake.requests.filter(isSummaryCall)).toHaveLength(1);
    // The worker did it (in cluster mode the gateway has no model client): recorded before it answered.
    expect(await compactionUsage(t)).toBe(usageBefore + 1);
    const stored = await messagesOf(t, id);
    expect(stored.map((m) => Boolean(m.compactedAt))).toEqual([true, true, false, false, false, false]);
    await chat(t, 'forced', 'short 4');
    const sent = t.fake.requests.at(-1)!.body.messages;
    expect(String(sent[0]!.content)).toContain(body.summary);
    expect(sent.map((m) => m.content)).toEqual([sent[0]!.content, 'short 2', expect.stringMatching(/^answer /), 'short 3', expect.stringMatching(/^answer /), 'short 4']);
    // Again: nothing older than the kept messages... until more turns come.
    const again = await fetch(`${t.baseURL}/sessions/${id}/compact`, { method: 'POST' });
    expect(((await again.json()) as { compacted: number }).compacted).toBe(2);
    const missing = await fetch(`${t.baseURL}/sessions/nope/compact`, { method: 'POST' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: expect.stringContaining('nope') });
  });

  it('a failed summary on request answers 502 {error} and marks nothing', async () => {
    const t = target();
    for (let i = 1; i <= 3; i++) await chat(t, 'forced-fail', `short ${i}`);
    const id = await sessionIdOf(t, 'forced-fail');
    t.failSummaries.on = true;
    try {
      const res = await fetch(`${t.baseURL}/sessions/${id}/compact`, { method: 'POST' });
      expect(res.status).toBe(502);
      expect(await res.json()).toEqual({ error: expect.stringContaining('could not summarise') });
    } finally {
      t.failSummaries.on = false;
    }
    expect((await messagesOf(t, id)).filter((m) => m.compactedAt)).toHaveLength(0);
  });
}

describe('context compaction, embedded mode', () => {
  let embedded: EmbeddedRuntime | undefined;
  let target: Target | undefined;
  const failSummaries = { on: false };
  beforeAll(async () => {
    const fake = await startModel(failSummaries);
    embedded = await bootEmbedded('compaction', ['server: {host: 127.0.0.1, port: 0}', ...configLines(fake)], { service: 'standalone' });
    const { port } = await startStandalone(embedded.runtime);
    target = { baseURL: `http://127.0.0.1:${port}/api/v1`, fake, failSummaries };
    await createAgent(target.baseURL);
  }, 180_000);
  afterAll(async () => {
    await embedded?.stop();
    await target?.fake.close();
  });
  compactionConformance(() => target!);
});

describeWithServers('context compaction, cluster mode (gateway and worker processes)', () => {
  let cluster: TestCluster | undefined;
  let target: Target | undefined;
  const failSummaries = { on: false };
  beforeAll(async () => {
    const fake = await startModel(failSummaries);
    cluster = await startTestCluster({ workers: 1, configLines: configLines(fake) });
    target = { baseURL: cluster.baseURL, fake, failSummaries };
    await createAgent(target.baseURL);
  }, 240_000);
  afterAll(async () => {
    await cluster?.stop();
    await target?.fake.close();
  });
  compactionConformance(() => target!);
});
