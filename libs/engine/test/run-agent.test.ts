import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRequest } from '@agentry/contracts';
import { claimRun, getRun, insertRuleChain, insertRun, insertSkill, writeWorkspaceFile, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { agentInstructions, buildConversation, runAgent, type ChatMessage, type ModelCallRequest, type ModelEvent, type RunDeps } from '../src/index.js';
import { fakeRunDeps } from './fake-run-deps.js';

describe('buildConversation', () => {
  const request = {
    messages: [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'old question' },
      { role: 'assistant' as const, content: 'old answer' },
      { role: 'user' as const, content: 'new 1' },
      { role: 'user' as const, content: 'new 2' },
    ],
  };

  it('without a session sends the request as it is, after the instructions', () => {
    const { messages, newTurns } = buildConversation('You are X.', request, null);
    expect(messages).toEqual([
      { role: 'system', content: 'You are X.\n\nBe brief.' },
      { role: 'user', content: 'old question' },
      { role: 'assistant', content: 'old answer' },
      { role: 'user', content: 'new 1' },
      { role: 'user', content: 'new 2' },
    ]);
    expect(newTurns).toEqual([]);
  });

  it('with a session sends the stored history and only the trailing user messages', () => {
    const history = [
      { role: 'user' as const, content: 'h1' },
      { role: 'assistant' as const, content: 'h2' },
    ];
    const { messages, newTurns } = buildConversation('', request, history);
    expect(messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'h1' },
      { role: 'assistant', content: 'h2' },
      { role: 'user', content: 'new 1' },
      { role: 'user', content: 'new 2' },
    ]);
    expect(newTurns).toEqual([
      { role: 'user', content: 'new 1' },
      { role: 'user', content: 'new 2' },
    ]);
  });

  it("keeps a client tool exchange's calls and call ids, with a session and without", () => {
    const call = { id: 'c1', type: 'function' as const, function: { name: 'get_weather', arguments: '{}' } };
    const exchange = {
      messages: [
        { role: 'user' as const, content: 'weather?' },
        { role: 'assistant' as const, content: '', tool_calls: [call] },
        { role: 'tool' as const, content: 'sunny', tool_call_id: 'c1' },
      ],
    };
    expect(buildConversation('', exchange, null).messages).toEqual(exchange.messages);
    // The session holds the question and the call: the tool result after it is the new turn.
    const history = [
      { role: 'user' as const, content: 'weather?' },
      { role: 'assistant' as const, content: '', toolCalls: [call] },
    ];
    const { messages, newTurns } = buildConversation('', exchange, history);
    expect(messages).toEqual(exchange.messages);
    expect(newTurns).toEqual([{ role: 'tool', content: 'sunny', toolCallId: 'c1' }]);
    // A result for a call the session never made is refused in words, not sent to fail at the provider.
    expect(() => buildConversation('', exchange, [{ role: 'user' as const, content: 'weather?' }, { role: 'assistant' as const, content: 'no calls' }])).toThrow(
      /the tool result for call "c1" answers no tool call of this session/,
    );
  });
});

let handle: DbHandle;

const agentNode = (id: string, configuration: JsonValue): JsonValue => ({ id, type: 'ai/agent', configuration });

async function chain(id: string, kind: 'agent' | 'rule', nodes: JsonValue[], connections: Array<[string, string]> = []): Promise<void> {
  const dsl = { ruleChain: { id, name: id }, metadata: { nodes, connections: connections.map(([fromId, toId]) => ({ fromId, toId, type: 'Success' })) } };
  await insertRuleChain(handle.db, { id, kind, agentId: null, name: id, category: null, dsl });
}

/** An agent with a workspace file and a skill of its own, so that its instructions show whether they were rendered. */
async function agent(id: string, nodes: JsonValue[], connections: Array<[string, string]> = []): Promise<void> {
  await chain(id, 'agent', nodes, connections);
  await writeWorkspaceFile(handle.db, id, 'NOTES.md', Buffer.from(`${id} notes`), 'create');
  await insertSkill(handle.db, { scope: 'local', agentId: id, name: `${id}-skill` }, { description: `what ${id} knows`, content: 'body', status: 'active' });
}

beforeAll(async () => {
  handle = await createTestPglite();
  await agent('boss', [agentNode('a', { provider: 'p', systemPrompt: 'Boss ${ruleChain.id}: ${include(NOTES.md)}', tools: [{ type: 'agent', name: 'ask_helper', targetId: 'helper' }] })]);
  await agent('helper', [agentNode('a', { provider: 'p', systemPrompt: 'Helper ${ruleChain.id}: ${include(NOTES.md)}' })]);
  await agent('twostep', [agentNode('a1', { provider: 'p', systemPrompt: 'First ${ruleChain.id}' }), agentNode('a2', { provider: 'p', systemPrompt: 'Second ${ruleChain.id}: ${include(NOTES.md)}' })], [['a1', 'a2']]);
  await chain('summarise', 'rule', [agentNode('s', { provider: 'p', systemPrompt: 'Summariser for ${ruleChain.id}: ${include(NOTES.md)}' })]);
  await agent('caller', [agentNode('a', { provider: 'p', systemPrompt: 'Caller', tools: [{ type: 'rulechain', name: 'summarise', targetId: 'summarise' }] })]);
});
afterAll(async () => {
  await handle?.close();
});

/**
 * A model that delegates once when it has a tool and was asked to (`delegate`), answers `done`
 * after a tool result, and `ok` otherwise.
 */
async function* delegatingModel(req: ModelCallRequest): AsyncIterable<ModelEvent> {
  const last = req.messages.at(-1)!;
  if (last.role === 'user' && last.content === 'delegate' && req.tools?.length) {
    const name = (req.tools[0] as { function: { name: string } }).function.name;
    yield { type: 'tool_calls', calls: [{ id: 'c1', name, arguments: JSON.stringify({ message: 'help' }) }] };
    yield { type: 'done', finishReason: 'tool_calls', provider: 'p', model: 'm' };
    return;
  }
  yield { type: 'text', text: last.role === 'tool' ? 'done' : 'ok' };
  yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } };
}

let runs = 0;
async function runOf(agentId: string, request: RunRequest, overrides: Partial<RunDeps> = {}, signal = new AbortController().signal) {
  const id = `run_${++runs}`;
  await insertRun(handle.db, { id, agentId, sessionId: null, source: request.reply ? 'chat_a' : 'api', request: request as unknown as JsonValue });
  const run = (await claimRun(handle.db, id))!;
  const { deps, record } = fakeRunDeps(handle.db, { stream: delegatingModel, ...overrides });
  await runAgent(deps, run, signal);
  return { id, record, stored: await getRun(handle.db, id) };
}

const systemOf = (messages: ChatMessage[]) => messages.find((m) => m.role === 'system')?.content;
const instructionsOf = (agentId: string, systemPrompt: string) => agentInstructions(fakeRunDeps(handle.db).deps, { systemPrompt }, agentId);

describe('the instructions each agent of a run gets', () => {
  it('the answering agent: its rendered prompt and skills, then the client system messages', async () => {
    const { record } = await runOf('boss', { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }] });
    const system = systemOf(record.calls[0]!.messages);
    expect(system).toBe(`${await instructionsOf('boss', 'Boss ${ruleChain.id}: ${include(NOTES.md)}')}\n\nBe brief.`);
    expect(system).toMatch(/^Boss boss: boss notes\n\n/);
    expect(system).toContain('boss-skill');
  });

  it('a sub-agent: its own rendered prompt and skills, without the client system messages', async () => {
    const { record, stored } = await runOf('boss', { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'delegate' }] });
    expect(stored?.status).toBe('succeeded');
    const helperCall = record.calls.find((c) => c.messages.some((m) => m.role === 'user' && m.content === 'help'))!;
    const system = systemOf(helperCall.messages)!;
    expect(system).toBe(await instructionsOf('helper', 'Helper ${ruleChain.id}: ${include(NOTES.md)}'));
    expect(system).toMatch(/^Helper helper: helper notes\n\n/);
    expect(system).toContain('helper-skill');
    expect(system).not.toContain('Be brief.');
  });

  it('an ai/agent node after the answer: rendered with skills, not the raw template (it used to get the raw one)', async () => {
    const { record, stored } = await runOf('twostep', { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }] });
    expect(stored?.status).toBe('succeeded');
    expect(record.calls).toHaveLength(2);
    expect(systemOf(record.calls[0]!.messages)).toBe(`${await instructionsOf('twostep', 'First ${ruleChain.id}')}\n\nBe brief.`);
    const silent = systemOf(record.calls[1]!.messages)!;
    expect(silent).toBe(await instructionsOf('twostep', 'Second ${ruleChain.id}: ${include(NOTES.md)}'));
    expect(silent).toMatch(/^Second twostep: twostep notes\n\n/);
    expect(silent).toContain('twostep-skill');
    expect(silent).not.toContain('${');
    expect(silent).not.toContain('Be brief.');
  });

  it("an ai/agent node of a rule-chain tool: rendered on behalf of the calling agent, with its skills", async () => {
    const { record, stored } = await runOf('caller', { messages: [{ role: 'user', content: 'delegate' }] });
    expect(stored?.status).toBe('succeeded');
    const chainCall = record.calls.find((c) => c.messages.some((m) => m.role === 'user' && m.content.includes('help')) && !c.tools)!;
    const system = systemOf(chainCall.messages)!;
    expect(system).toBe(await instructionsOf('caller', 'Summariser for ${ruleChain.id}: ${include(NOTES.md)}'));
    expect(system).toMatch(/^Summariser for caller: caller notes\n\n/);
    expect(system).toContain('caller-skill');
  });
});

describe('runAgent through its hooks', () => {
  it('publishes the answer in order, then counts the run and says it was delivered', async () => {
    const { id, record, stored } = await runOf('helper', { messages: [{ role: 'user', content: 'hi' }] });
    expect(record.events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'text'],
      [1, 'done'],
    ]);
    expect(record.events.every((e) => e.runId === id)).toBe(true);
    expect(stored).toMatchObject({ status: 'succeeded', output: 'ok', streamed: true });
    expect(record.delivered).toBe(1);
    expect(record.ended).toEqual([{ status: 'succeeded', source: 'api' }]);
    expect(record.replies).toEqual([]);
  });

  it('queues the answer of a chat run as its reply', async () => {
    const reply = { platform: 'chat_a', accountId: 'acc', chatId: 'chat' };
    const { id, record } = await runOf('helper', { messages: [{ role: 'user', content: 'hi' }], reply });
    expect(record.replies).toEqual([{ runId: id, text: 'ok' }]);
    expect(record.ended).toEqual([{ status: 'succeeded', source: 'chat_a' }]);
  });

  it('fails a run whose model fails: one error event, counted, the chat told', async () => {
    const failing = async function* (): AsyncIterable<ModelEvent> {
      yield* [];
      throw new Error('provider exploded');
    };
    const reply = { platform: 'chat_a', accountId: 'acc', chatId: 'chat' };
    const { id, record, stored } = await runOf('helper', { messages: [{ role: 'user', content: 'hi' }], reply }, { stream: failing });
    expect(record.events).toEqual([{ runId: id, seq: 0, type: 'error', message: 'the agent failed unexpectedly', status: 500 }]);
    expect(stored?.status).toBe('failed');
    expect(record.ended).toEqual([{ status: 'failed', source: 'chat_a' }]);
    expect(record.replies).toEqual([{ runId: id, text: 'Sorry, I could not answer that: the agent failed unexpectedly' }]);
    expect(record.delivered).toBe(0);
  });

  it('refuses a run of an agent disabled after it was queued: 403 naming it, no model call, the chat told', async () => {
    const dsl = { ruleChain: { id: 'sleeper', name: 'sleeper', disabled: true }, metadata: { nodes: [agentNode('a', { provider: 'p', systemPrompt: 'Zzz' })], connections: [] } };
    await insertRuleChain(handle.db, { id: 'sleeper', kind: 'agent', agentId: null, name: 'sleeper', category: null, dsl });
    const reply = { platform: 'chat_a', accountId: 'acc', chatId: 'chat' };
    const { id, record, stored } = await runOf('sleeper', { messages: [{ role: 'user', content: 'hi' }], reply });
    const message = 'Not allowed: agent "sleeper" is disabled';
    expect(record.calls).toEqual([]);
    expect(record.events).toEqual([{ runId: id, seq: 0, type: 'error', message, status: 403 }]);
    expect(stored).toMatchObject({ status: 'failed', error: message });
    expect(record.replies).toEqual([{ runId: id, text: `Sorry, I could not answer that: ${message}` }]);
  });

  it('a disabled agent called as a tool runs nothing: the calling agent gets the refusal as the tool result', async () => {
    await chain('napper', 'agent', [agentNode('a', { provider: 'p', systemPrompt: 'Zzz' })]);
    await handle.db.updateTable('rule_chains').set({ dsl: JSON.stringify({ ruleChain: { id: 'napper', name: 'napper', disabled: true }, metadata: { nodes: [agentNode('a', { provider: 'p', systemPrompt: 'Zzz' })], connections: [] } }) }).where('id', '=', 'napper').execute();
    await chain('waker', 'agent', [agentNode('a', { provider: 'p', systemPrompt: 'Waker', tools: [{ type: 'agent', name: 'ask_napper', targetId: 'napper' }] })]);
    const { record, stored } = await runOf('waker', { messages: [{ role: 'user', content: 'delegate' }] });
    expect(stored?.status).toBe('succeeded');
    expect(record.calls.some((c) => systemOf(c.messages) === 'Zzz')).toBe(false);
    const toolResult = record.calls.at(-1)!.messages.find((m) => m.role === 'tool');
    expect(toolResult?.content).toContain('agent "napper" is disabled');
  });

  it('cancels a run whose signal aborts, keeping what it had streamed', async () => {
    const ctl = new AbortController();
    const slow = async function* (req: ModelCallRequest): AsyncIterable<ModelEvent> {
      yield { type: 'text', text: 'partial' };
      ctl.abort(new Error('the client went away'));
      throw req.signal.reason;
    };
    const { record, stored } = await runOf('helper', { messages: [{ role: 'user', content: 'hi' }] }, { stream: slow }, ctl.signal);
    expect(stored).toMatchObject({ status: 'cancelled', output: 'partial' });
    expect(record.ended).toEqual([{ status: 'cancelled', source: 'api' }]);
    expect(record.delivered).toBe(0);
  });
});
