import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendMessages, claimRun, ensureSession, insertRuleChain, insertRun, listSessionMessages, type DbHandle, type StoredSessionMessage } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { splitForSummary } from '../src/compaction/compaction.js';
import { conversationTokens, conversationTokensAtMost, estimateTokens, tokenCounter } from '../src/compaction/tokens.js';
import { runAgent, type ModelCallRequest, type ModelEvent, type RunDeps } from '../src/index.js';
import { fakeRunDeps } from './fake-run-deps.js';

describe('token counting', () => {
  it('counts a model js-tiktoken knows exactly, with or without a provider prefix, and estimates the others', async () => {
    const gpt = await tokenCounter('gpt-4o');
    expect(gpt.exact).toBe(true);
    expect(gpt.count('hello world')).toBe(2);
    expect((await tokenCounter('openai/gpt-4o')).count('hello world')).toBe(2);
    // Special-token text from a user is counted as plain text, never refused.
    expect(gpt.count('<|endoftext|>')).toBeGreaterThan(1);
    const local = await tokenCounter('llama3:8b');
    expect(local.exact).toBe(false);
    expect(local.count('x'.repeat(40))).toBe(10);
    expect(estimateTokens('')).toBe(0);
  });

  it('the byte bound is never below the count, whatever the script', async () => {
    const gpt = await tokenCounter('gpt-4o');
    const messages = [
      { role: 'user' as const, content: '你好，世界！这是一个测试。' },
      { role: 'assistant' as const, content: '🙂🙃 emoji 🧪 and ñ' },
      { role: 'assistant' as const, content: '', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{"a":1}' } }] },
    ];
    expect(conversationTokensAtMost(messages)).toBeGreaterThanOrEqual(conversationTokens(gpt, messages));
    expect(conversationTokensAtMost(messages)).toBeGreaterThanOrEqual(conversationTokens(await tokenCounter(undefined), messages));
  });
});

describe('splitForSummary', () => {
  const m = (id: number, role: StoredSessionMessage['role']): StoredSessionMessage => ({ id, role, content: `${role} ${id}` });
  it('keeps the newest messages and never starts them with a tool result cut from its call', () => {
    const history = [m(1, 'user'), m(2, 'assistant'), m(3, 'user'), m(4, 'assistant'), m(5, 'tool'), m(6, 'tool'), m(7, 'assistant')];
    expect(splitForSummary(history, 2)).toEqual({ older: history.slice(0, 3), recent: history.slice(3) });
    expect(splitForSummary(history, 3).recent[0]!.id).toBe(4);
    expect(splitForSummary(history, 10)).toEqual({ older: [], recent: history });
  });
});

describe('sliding window (strategy sliding_window)', () => {
  let handle: DbHandle;
  beforeAll(async () => {
    handle = await createTestPglite();
    const configuration = { provider: 'p', model: 'gpt-4o', systemPrompt: 'Hi.', compaction: { strategy: 'sliding_window', targetTokensPercent: 100 } };
    const dsl = { ruleChain: { id: 'win', name: 'win' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration }], connections: [] } };
    await insertRuleChain(handle.db, { id: 'win', kind: 'agent', agentId: null, name: 'win', category: null, dsl });
  });
  afterAll(async () => {
    await handle?.close();
  });

  async function* answer(): AsyncIterable<ModelEvent> {
    yield { type: 'text', text: 'fine' };
    yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'gpt-4o' };
  }

  it('leaves out the oldest turns (and a tool result whose call went) to fit the exact budget; stores and marks nothing', async () => {
    const session = await ensureSession(handle.db, { agentId: 'win', sessionKey: 's' });
    const long = 'word '.repeat(200);
    await appendMessages(handle.db, session.id, 'r0', [
      { role: 'user', content: `first ${long}` },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', content: `result ${long}`, toolCallId: 'c1' },
      { role: 'assistant', content: `second ${long}` },
      { role: 'user', content: `third ${long}` },
      { role: 'assistant', content: `fourth ${long}` },
    ]);
    await insertRun(handle.db, { id: 'run_w', agentId: 'win', sessionId: session.id, source: 'api', request: { messages: [{ role: 'user', content: 'now?' }] } });
    const calls: ModelCallRequest[] = [];
    const overrides: Partial<RunDeps> = {
      stream: answer,
      modelInfo: async () => ({ provider: 'p', model: 'gpt-4o', contextWindow: 500 }),
    };
    const { deps, record } = fakeRunDeps(handle.db, overrides);
    await runAgent(deps, (await claimRun(handle.db, 'run_w'))!, new AbortController().signal);
    calls.push(...record.calls);
    expect(calls).toHaveLength(1);
    const sent = calls[0]!.messages;
    expect(conversationTokens(await tokenCounter('gpt-4o'), sent)).toBeLessThanOrEqual(500);
    expect(sent.map((x) => x.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(sent.map((x) => x.content.split(' ')[0])).toEqual(['Hi.', 'third', 'fourth', 'now?']);
    const stored = await listSessionMessages(handle.db, session.id);
    expect(stored).toHaveLength(8);
    expect(stored.filter((x) => x.compactedAt)).toEqual([]);
  });

  it('mode off (the defaults, the agent not overriding it) sends the whole history window, over budget or not', async () => {
    const session = await ensureSession(handle.db, { agentId: 'win', sessionKey: 'off' });
    const long = 'word '.repeat(200);
    await appendMessages(handle.db, session.id, 'r1', [1, 2, 3, 4].map((i) => ({ role: i % 2 ? ('user' as const) : ('assistant' as const), content: `${i} ${long}` })));
    await insertRun(handle.db, { id: 'run_off', agentId: 'win', sessionId: session.id, source: 'api', request: { messages: [{ role: 'user', content: 'now?' }] } });
    const { deps, record } = fakeRunDeps(handle.db, {
      stream: answer,
      modelInfo: async () => ({ provider: 'p', model: 'gpt-4o', contextWindow: 500 }),
      compaction: () => ({ mode: 'off', strategy: 'summary', keep_recent_count: 1, target_tokens_percent: 50, min_messages_to_compact: 1 }),
    });
    await runAgent(deps, (await claimRun(handle.db, 'run_off'))!, new AbortController().signal);
    expect(record.calls).toHaveLength(1);
    expect(record.calls[0]!.messages).toHaveLength(6);
  });
});
