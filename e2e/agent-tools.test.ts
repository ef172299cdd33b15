import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolError, builtinTools, type ToolDefinition } from '@agentry/engine';
import type { Runtime } from '@agentry/runtime';
import { answerMcp, startFakeModel, type FakeModel } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { startGateway } from '@agentry/gateway';
import { bootEmbedded, type EmbeddedRuntime } from './harness.js';
import { openaiErrorMessage } from './openai-error.js';

/**
 * Agents doing work through /chat/completions: the fake model scripts tool calls, the worker
 * runs them (test built-ins, a sub-agent, a real MCP server), and the stream carries the tool
 * events with X-Stream-Protocol: agui.
 */
const API_KEY = 'sk-agent-tools-account-0123456789';
const TEST_TOOLS: Record<string, ToolDefinition> = {
  echo: {
    name: 'echo',
    description: 'Echoes text.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    run: async (args) => `echo: ${String(args.text)}`,
  },
  explode: {
    name: 'explode',
    description: 'Always fails.',
    parameters: { type: 'object' },
    run: async () => {
      throw new ToolError('the tool exploded');
    },
  },
};

let runtime: Runtime;
let fake: FakeModel;
let down: FakeModel;
let mcp: http.Server;
let baseURL: string;
let embedded: EmbeddedRuntime | undefined;

function startMcpServer(): Promise<http.Server> {
  const server = http.createServer((req, res) =>
    answerMcp(req, res, 'calc', (mcp) =>
      mcp.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
        content: [{ type: 'text', text: String(a + b) }],
      })),
    ),
  );
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function createAgent(id: string, configuration: Record<string, unknown>) {
  const res = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id, name: id },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: `You are ${id}.`, ...configuration } }], connections: [] },
    }),
  });
  if (res.status !== 201) throw new Error(`create ${id}: ${res.status} ${await res.text()}`);
}

beforeAll(async () => {
  fake = await startFakeModel();
  down = await startFakeModel();
  mcp = await startMcpServer();
  embedded = await bootEmbedded('agent-tools', [
    'server: {host: 127.0.0.1, port: 0}',
    'models:',
    '  default_provider: fake',
    '  providers:',
    `    fake: {base_url: "${fake.url}", model: fake-model}`,
    `    down: {base_url: "${down.url}", model: fake-model}`,
    `channels: {api: {accounts: {tools: {api_key: "${API_KEY}"}}}}`,
  ]);
  runtime = embedded.runtime;
  await startAgentWorker(runtime, { builtin: { ...builtinTools, ...TEST_TOOLS } });
  const { port } = await startGateway(runtime);
  runtime.health.markStarted();
  baseURL = `http://127.0.0.1:${port}/api/v1`;
  const mcpUrl = `http://127.0.0.1:${(mcp.address() as AddressInfo).port}/mcp`;
  const chain = await fetch(`${baseURL}/rules`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'double', name: 'Double' },
      metadata: {
        nodes: [
          { id: 't', type: 'jsTransform', configuration: { jsScript: 'msg.n = msg.n * 2; return {msg, metadata, msgType};' } },
          { id: 'e', type: 'end' },
        ],
        connections: [{ fromId: 't', toId: 'e', type: 'Success' }],
      },
    }),
  });
  if (chain.status !== 201) throw new Error(`create chain: ${chain.status} ${await chain.text()}`);
  await createAgent('helper', {});
  await createAgent('main', {
    tools: [
      { type: 'builtin', name: 'echo' },
      { type: 'builtin', name: 'explode' },
      { type: 'agent', name: 'ask_helper', targetId: 'helper', description: 'Ask the helper agent.' },
      { type: 'agent', name: 'ask_self', targetId: 'main' },
      // The test server is on loopback, which the outbound-address policy opens only when told to.
      { type: 'mcp', name: 'calc', config: { url: mcpUrl, allowHosts: ['127.0.0.1'] } },
      { type: 'rulechain', name: 'double', targetId: 'double', description: 'Doubles n.' },
    ],
  });
  await createAgent('resilient', { provider: 'down', failover: [{ provider: 'fake' }] });
  await createAgent('writer', {
    systemPrompt: 'Agent ${ruleChain.id}. Notes exist: ${fileExists(notes.md)}.',
    tools: [
      { type: 'builtin', name: 'write' },
      { type: 'builtin', name: 'read' },
      { type: 'builtin', name: 'skill' },
    ],
    disabledSkills: ['secret-skill'],
  });
  await createAgent('handy', {
    maxStep: 3,
    tools: ['write', 'edit', 'grep', 'glob', 'cron', 'http_fetch', 'bash', 'echo'].map((name) => ({ type: 'builtin', name })),
  });
  const guarded = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'guarded', name: 'Guarded' },
      metadata: {
        nodes: [
          { id: 'filter', type: 'jsFilter', configuration: { jsScript: "return String(msg).indexOf('forbidden') < 0;" } },
          { id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: 'You are guarded.' } },
          { id: 'refuse', type: 'jsTransform', configuration: { jsScript: "return {msg: 'I cannot help with that.'};" } },
        ],
        connections: [
          { fromId: 'filter', toId: 'agent', type: 'True' },
          { fromId: 'filter', toId: 'refuse', type: 'False' },
        ],
      },
    }),
  });
  if (guarded.status !== 201) throw new Error(`guarded: ${guarded.status} ${await guarded.text()}`);
  // Nodes after the ai/agent node: one rewrites msg.data, the next one throws.
  const postscript = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: 'postscript', name: 'Postscript' },
      metadata: {
        nodes: [
          { id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: 'You are postscript.' } },
          { id: 'rewrite', type: 'jsTransform', configuration: { jsScript: "return {msg: 'REWRITTEN AFTER THE FACT'};" } },
          { id: 'explode', type: 'jsTransform', configuration: { jsScript: "throw new Error('post-node exploded');" } },
        ],
        connections: [
          { fromId: 'agent', toId: 'rewrite', type: 'Success' },
          { fromId: 'rewrite', toId: 'explode', type: 'Success' },
        ],
      },
    }),
  });
  if (postscript.status !== 201) throw new Error(`postscript: ${postscript.status} ${await postscript.text()}`);
  for (const skill of [
    { name: 'haiku', description: 'Write haiku.', content: '# Haiku\nFive, seven, five.' },
    { name: 'secret-skill', description: 'Hidden.', content: 'never shown' },
  ]) {
    const res = await fetch(`${baseURL}/agents/writer/skills`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(skill) });
    if (res.status !== 201) throw new Error(`skill: ${res.status} ${await res.text()}`);
  }
}, 120_000);

afterAll(async () => {
  await embedded?.stop();
  await Promise.all([fake?.close(), down?.close(), new Promise((r) => mcp?.close(r))]);
});

const client = () => new OpenAI({ baseURL, apiKey: API_KEY, maxRetries: 0 });

async function agui(model: string, content: string, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, 'x-stream-protocol': 'agui' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], stream: true, ...extra }),
  });
  const chunks = (await res.text())
    .split('\n\n')
    .map((e) => e.replace(/^id: [^\n]*\n/, ''))
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)) as { choices: Array<{ delta: { content?: string; tool_calls?: Array<Record<string, string>> } }> });
  return {
    tools: chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []),
    text: chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''),
  };
}

describe('tools through the chat endpoint', () => {
  it('runs a built-in tool and streams its events in order with agui', async () => {
    fake.script({ toolCalls: [{ id: 'c1', name: 'echo', arguments: '{"text":"hi"}' }] }, { text: 'The echo said hi.' });
    const { tools, text } = await agui('main', 'use echo');
    expect(tools).toEqual([
      { type: 'TOOL_CALL_START', toolCallId: 'c1', toolCallName: 'echo', arguments: '{"text":"hi"}', toolType: 'builtin' },
      { type: 'TOOL_CALL_RESULT', toolCallId: 'c1', toolCallName: 'echo', content: 'echo: hi', toolType: 'builtin' },
    ]);
    expect(text).toBe('The echo said hi.');
    // The model got the tool definitions and then the tool result.
    const [first, second] = fake.requests.slice(-2);
    expect((first!.body as unknown as { tools: Array<{ function: { name: string } }> }).tools.map((t) => t.function.name)).toEqual([
      'echo',
      'explode',
      'ask_helper',
      'ask_self',
      'calc__add',
      'double',
    ]);
    expect(second!.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'echo: hi' });
  });

  it('sends no tool data without the header', async () => {
    fake.script({ toolCalls: [{ id: 'c2', name: 'echo', arguments: '{"text":"x"}' }] }, { text: 'done' });
    const stream = await client().chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'x' }], stream: true });
    const deltas = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta ?? {});
    expect(deltas.some((d) => 'tool_calls' in d)).toBe(false);
    expect(deltas.map((d) => d.content ?? '').join('')).toBe('done');
  });

  it('runs parallel calls, reports a failing tool as an error result, and continues', async () => {
    fake.script(
      {
        toolCalls: [
          { id: 'p1', name: 'explode', arguments: '{}' },
          { id: 'p2', name: 'echo', arguments: '{"text":"still here"}' },
        ],
      },
      { text: 'handled' },
    );
    const { tools, text } = await agui('main', 'parallel');
    expect(tools.map((t) => `${t.type}:${t.toolCallId}`)).toEqual(['TOOL_CALL_START:p1', 'TOOL_CALL_START:p2', 'TOOL_CALL_RESULT:p1', 'TOOL_CALL_RESULT:p2']);
    expect(tools[2]).toMatchObject({ content: 'Error: the tool exploded', isError: true });
    expect(tools[3]!.content).toBe('echo: still here');
    expect(tools[3]).not.toHaveProperty('isError');
    expect(text).toBe('handled');
  });

  it('asks a sub-agent (toolType subagent) and refuses a cycle', async () => {
    fake.script({ toolCalls: [{ id: 's1', name: 'ask_helper', arguments: '{"message":"what is 2+2?"}' }] }, { text: 'four' }, { text: 'delegated' });
    const { tools } = await agui('main', 'delegate');
    expect(tools[1]).toMatchObject({ type: 'TOOL_CALL_RESULT', toolCallName: 'ask_helper', content: 'four', toolType: 'subagent' });
    const helperCall = fake.requests.find((r) => r.body.messages[0]?.content === 'You are helper.');
    expect(helperCall?.body.messages).toEqual([
      { role: 'system', content: 'You are helper.' },
      { role: 'user', content: 'what is 2+2?' },
    ]);
    fake.script({ toolCalls: [{ id: 's2', name: 'ask_self', arguments: '{"message":"loop"}' }] }, { text: 'answered' });
    const cyc = await agui('main', 'cycle');
    expect(cyc.tools[1]!.content).toMatch(/^Error: .*already running in this chain \(main -> main\)/);
  });

  it('calls the tools of a real MCP server as <name>__<tool>', async () => {
    fake.script({ toolCalls: [{ id: 'm1', name: 'calc__add', arguments: '{"a":2,"b":3}' }] }, { text: 'It is 5.' });
    const { tools, text } = await agui('main', 'add');
    expect(tools[1]).toMatchObject({ type: 'TOOL_CALL_RESULT', toolCallName: 'calc__add', content: '5', toolType: 'mcp' });
    expect(text).toBe('It is 5.');
  });

  it('runs a rule chain as a tool (toolType rulechain): arguments in, the final message (data, type, metadata, end relation) out', async () => {
    fake.script({ toolCalls: [{ id: 'r1', name: 'double', arguments: '{"n":21}' }] }, { text: 'It is 42.' });
    const { tools } = await agui('main', 'double it');
    expect(tools[1]).toMatchObject({ type: 'TOOL_CALL_RESULT', toolCallName: 'double', toolType: 'rulechain' });
    expect(JSON.parse((tools[1] as { content: string }).content)).toEqual({ relation: 'Success', msgType: 'MESSAGE', metadata: {}, data: { n: 42 } });
  });

  it('uses the built-in workspace tools, renders the system prompt and injects active skills', async () => {
    fake.script(
      { toolCalls: [{ id: 'w1', name: 'write', arguments: JSON.stringify({ path: 'notes.md', content: 'remember the milk' }) }] },
      { toolCalls: [{ id: 'w2', name: 'read', arguments: JSON.stringify({ path: 'notes.md' }) }] },
      { toolCalls: [{ id: 'w3', name: 'skill', arguments: JSON.stringify({ skill: 'haiku' }) }] },
      { toolCalls: [{ id: 'w4', name: 'skill', arguments: JSON.stringify({ skill: 'secret-skill' }) }] },
      { text: 'done' },
    );
    const { tools } = await agui('writer', 'take a note');
    const results = tools.filter((t) => t.type === 'TOOL_CALL_RESULT');
    expect(results.map((r) => r.toolCallName)).toEqual(['write', 'read', 'skill', 'skill']);
    expect(results[1]!.content).toMatch(/remember the milk/);
    expect(results[2]!.content).toMatch(/Five, seven, five\./);
    expect(results[3]!.content).toMatch(/^Error: /);
    const file = await fetch(`${baseURL}/agents/writer/workspace/file?path=notes.md`);
    expect(((await file.json()) as { content: string }).content).toBe('remember the milk');
    // The next turn's instructions see the file, list the active skill and hide the disabled one.
    fake.script({ text: 'ok' });
    await agui('writer', 'again');
    const system = fake.requests.at(-1)!.body.messages[0]!.content;
    expect(system).toMatch(/^Agent writer\. Notes exist: true\./);
    expect(system).toMatch(/haiku: Write haiku\./);
    expect(system).not.toMatch(/secret-skill/);
  });

  it('runs edit, grep, glob, cron, http_fetch (refusing loopback) and bash over the workspace', async () => {
    const call = (id: string, name: string, args: unknown) => ({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] });
    fake.script(
      call('h1', 'write', { path: 'src/a.txt', content: 'alpha\nbeta\n' }),
      call('h2', 'edit', { path: 'src/a.txt', search: 'beta', replace: 'gamma' }),
      { text: 'edited' },
    );
    await agui('handy', 'edit');
    fake.script(call('h3', 'grep', { pattern: 'gam+a' }), call('h4', 'glob', { pattern: '**/*.txt' }), { text: 'searched' });
    const search = await agui('handy', 'search');
    const found = search.tools.filter((t) => t.type === 'TOOL_CALL_RESULT');
    expect(found[0]!.content).toMatch(/src\/a\.txt.*gamma/s);
    expect(found[1]!.content).toMatch(/src\/a\.txt/);
    fake.script(
      call('h5', 'cron', { operation: 'create', name: 'daily', schedule: '0 0 9 * * *', message: 'good morning' }),
      call('h6', 'http_fetch', { url: 'http://127.0.0.1:9/' }),
      { text: 'scheduled' },
    );
    const other = (await agui('handy', 'schedule')).tools.filter((t) => t.type === 'TOOL_CALL_RESULT');
    expect(other[0]!.content).toMatch(/daily/);
    expect(other[1]!.content).toMatch(/^Error: .*(private|loopback|not allowed|refused)/i);
    const jobs = (await (await fetch(`${baseURL}/agents/handy/cron`)).json()) as Array<{ name: string; schedule: string }>;
    expect(jobs).toEqual([expect.objectContaining({ name: 'daily', schedule: '0 0 9 * * *' })]);
    fake.script(call('h7', 'bash', { command: 'cat src/a.txt && echo made > out.txt' }), { text: 'ran' });
    const bash = (await agui('handy', 'bash')).tools.filter((t) => t.type === 'TOOL_CALL_RESULT');
    expect(JSON.parse(bash[0]!.content ?? '')).toMatchObject({ success: true, exitCode: 0, stdout: expect.stringContaining('gamma') });
    const out = await fetch(`${baseURL}/agents/handy/workspace/file?path=out.txt`);
    expect(((await out.json()) as { content: string }).content).toBe('made\n');
  });

  it('stops at maxStep and on identical repeated calls, with a clear final message', async () => {
    const same = { toolCalls: [{ id: 'd', name: 'echo', arguments: '{"text":"again"}' }] };
    fake.script(same, same, same);
    const doom = await agui('handy', 'loop');
    expect(doom.text).toMatch(/the same tool call \(echo\) was requested 3 times in a row/);
    const step = (i: number) => ({ toolCalls: [{ id: `s${i}`, name: 'echo', arguments: JSON.stringify({ text: `step ${i}` }) }] });
    fake.script(step(1), step(2), step(3));
    const capped = await agui('handy', 'steps');
    expect(capped.text).toMatch(/Stopped after 3 model calls \(maxStep\)/);
  });

  it("runs an agent's whole chain: a filter in front of the ai/agent node decides", async () => {
    const before = fake.requests.length;
    const refused = await client().chat.completions.create({ model: 'guarded', messages: [{ role: 'user', content: 'something forbidden' }] });
    expect(refused.choices[0]!.message.content).toBe('I cannot help with that.');
    expect(fake.requests.length).toBe(before);
    fake.script({ text: 'Happy to help.' });
    const allowed = await client().chat.completions.create({ model: 'guarded', messages: [{ role: 'user', content: 'something fine' }] });
    expect(allowed.choices[0]!.message.content).toBe('Happy to help.');
    expect(fake.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: 'You are guarded.' },
      { role: 'user', content: 'something fine' },
    ]);
  });

  // Issue 20, finding 8: these answered 500 "the agent failed unexpectedly".
  it('a script in front of the ai/agent node that fails answers 502, one broken whatever its input 422, as {error}', async () => {
    const cases: Array<[string, string, number, RegExp]> = [
      ['script-throws', "throw new Error('no temperature');", 502, /node "t" \(jsTransform\): Error: no temperature \(line 1\)/],
      ['script-loops', 'while (true) {}', 502, /script timed out after 1000 ms/],
      ['script-circular', 'var o = {}; o.self = o; return o;', 422, /the script returned a value that is not JSON/],
    ];
    for (const [id, jsScript, status, message] of cases) {
      const created = await fetch(`${baseURL}/agents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          ruleChain: { id, name: id },
          metadata: {
            nodes: [
              { id: 't', type: 'jsTransform', configuration: { jsScript } },
              { id: 'agent', type: 'ai/agent', configuration: { provider: 'fake' } },
            ],
            connections: [{ fromId: 't', toId: 'agent', type: 'Success' }],
          },
        }),
      });
      expect(created.status).toBe(201);
      const res = await fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ model: id, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status, id).toBe(status);
      expect(openaiErrorMessage(await res.json()), id).toMatch(message);
    }
  });

  it('stores what the client saw: nodes after the ai/agent node change neither the answer nor the session, and a throwing one fails nothing', async () => {
    const sessionId = `postscript-${Date.now()}`;
    fake.script({ text: 'The real answer.' });
    const streamed = await agui('postscript', 'question', { sessionId });
    expect(streamed.text).toBe('The real answer.');
    fake.script({ text: 'Second answer.' });
    const plain = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: 'postscript', messages: [{ role: 'user', content: 'again' }], sessionId }),
    });
    expect(plain.status).toBe(200);
    expect(((await plain.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe('Second answer.');
    // The second turn's context is the answer as delivered, not the rewritten one.
    expect(fake.requests.at(-1)!.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'question' },
      { role: 'assistant', content: 'The real answer.' },
      { role: 'user', content: 'again' },
    ]);
    const sessions = (await (await fetch(`${baseURL}/sessions?agentId=postscript`)).json()) as { data: Array<{ id: string; sessionKey: string }> };
    const session = sessions.data.find((x) => x.sessionKey === sessionId)!;
    const messages = (await (await fetch(`${baseURL}/sessions/${session.id}/messages`)).json()) as Array<{ role: string; content: string }>;
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'question'],
      ['assistant', 'The real answer.'],
      ['user', 'again'],
      ['assistant', 'Second answer.'],
    ]);
    const runs = await runtime.db.db.selectFrom('runs').select(['status', 'output', 'error']).where('agent_id', '=', 'postscript').orderBy('created_at').execute();
    expect(runs).toEqual([
      { status: 'succeeded', output: 'The real answer.', error: null },
      { status: 'succeeded', output: 'Second answer.', error: null },
    ]);
  });

  it('keeps tool calls and results in the session for the next turn', async () => {
    const sessionId = `tools-${Date.now()}`;
    fake.script({ toolCalls: [{ id: 'k1', name: 'echo', arguments: '{"text":"remember"}' }] }, { text: 'noted' }, { text: 'yes' });
    await agui('main', 'first', { sessionId });
    await agui('main', 'second', { sessionId });
    const last = fake.requests.at(-1)!.body.messages;
    expect(last.slice(1)).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'k1', type: 'function', function: { name: 'echo', arguments: '{"text":"remember"}' } }] },
      { role: 'tool', tool_call_id: 'k1', content: 'echo: remember' },
      { role: 'assistant', content: 'noted' },
      { role: 'user', content: 'second' },
    ]);
  });

  it('fails over to a second provider when the first returns 500', async () => {
    const fail = { status: 500, body: { error: { message: 'down' } } };
    down.script(fail, fail, fail, fail);
    fake.script({ text: 'from the backup' });
    const res = await client().chat.completions.create({ model: 'resilient', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.choices[0]!.message.content).toBe('from the backup');
    expect(down.requests.length).toBeGreaterThanOrEqual(1);
  });
});
