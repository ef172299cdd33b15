import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { QueueNames, type RunEvent } from '@agentry/contracts';
import { finishRun, getRun, insertRuleChain } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, waitFor } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { runEventChannel } from '@agentry/runs';

/**
 * The gateway's relay, with a scripted stand-in for the agent-worker (a "test tool" run): what
 * reaches the client for each kind of run event, with and without the agui protocol.
 */
/** A run event without its envelope (distributed over the union). */
type Body = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'runId' | 'seq'> : never) : never;
const SCRIPTS: Record<string, Body[]> = {
  tools: [
    { type: 'tool_start', toolCallId: 'call_1', toolName: 'echo', toolType: 'builtin', arguments: '{"text":"hi"}' },
    { type: 'tool_result', toolCallId: 'call_1', toolName: 'echo', toolType: 'builtin', content: 'hi' },
    { type: 'text', text: 'The tool said hi.' },
    { type: 'done', finishReason: 'stop' },
  ],
  failing: [{ type: 'text', text: 'partial' }, { type: 'error', message: 'provider fake failed: 500', status: 502 }],
  early: [{ type: 'error', message: 'Upstream failure: provider fake answered 500', status: 502 }],
  early429: [{ type: 'error', message: 'the provider is rate limiting', status: 429 }],
  slowfail: [{ type: 'error', message: 'Upstream failure: provider fake answered 500', status: 502 }],
  silent: [{ type: 'done', finishReason: 'stop' }],
};

const logs: string[] = [];
let runtime: Runtime;
let app: FastifyInstance;
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-relay-'));

beforeAll(async () => {
  // A short silence before the relay reads the run row (the lost-events tests); a stream's
  // headers wait for the first event at most 500 ms (the slow runs take longer).
  fs.writeFileSync(path.join(cwd, 'config.yaml'), 'reliability: {relay_check_ms: 200}\nserver: {stream_headers_after_ms: 500, cors_origins: ["https://app.example"]}\n');
  runtime = await bootstrap({
    service: 'relay-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'relay-master-key-0123456789-abcdef' },
    cwd,
    logDestination: { write: (line: string) => void logs.push(line) },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await insertRuleChain(runtime.db.db, {
    id: 'relay',
    kind: 'agent',
    agentId: null,
    name: 'Relay',
    category: null,
    dsl: { ruleChain: { id: 'relay', name: 'Relay' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent' }], connections: [] } },
  });
  runtime.bus.queue.consume(
    QueueNames.agentRun,
    async (job) => {
      // The queue carries forced compactions too: this stand-in runs runs only.
      if (job.data.type !== 'agent-run') throw new Error(`not a run: ${job.data.type}`);
      const { runId } = job.data;
      const run = await getRun(runtime.db.db, runId);
      const prompt = (run!.request as { messages: Array<{ content: string }> }).messages.at(-1)!.content;
      const [scenario, option] = prompt.split(':');
      let seq = 0;
      // A retry notice consumes no seq: it carries the next event's.
      const publish = (e: Body) => runtime.bus.pubsub.publish(runEventChannel(run!), { ...e, runId, seq: e.type === 'retry' ? seq : seq++ } as RunEvent);
      if (scenario === 'slow' || scenario === 'slowfail') await new Promise((r) => setTimeout(r, 800));
      // Events lost on the way (Redis away), the outcome committed all the same.
      if (scenario === 'lost') {
        await publish({ type: 'text', text: 'par' });
        await finishRun(runtime.db.db, runId, { status: 'succeeded', output: option ?? 'partial answer', usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 } });
        return;
      }
      if (scenario === 'lostfail') {
        await finishRun(runtime.db.db, runId, { status: 'failed', error: 'the provider broke' });
        return;
      }
      // A provider retry, then the answer at once or (`retried:late`) after the headers' bound.
      if (scenario === 'retried') {
        await publish({ type: 'retry', attempt: 2, of: 3, reason: 'provider unreachable' });
        if (option === 'late') await new Promise((r) => setTimeout(r, 800));
        await publish({ type: 'text', text: 'answered' });
        await publish({ type: 'done', finishReason: 'stop' });
        return;
      }
      if (scenario === 'gap') {
        await publish({ type: 'text', text: 'a' });
        seq++; // lose one event
        await publish({ type: 'text', text: 'c' });
        await publish({ type: 'done', finishReason: 'stop' });
        return;
      }
      const fallback: Body[] = [
        { type: 'text', text: option ?? 'ok' },
        { type: 'done', finishReason: 'stop' },
      ];
      for (const e of SCRIPTS[scenario!] ?? fallback) await publish(e);
    },
    { concurrency: 4 },
  );
  await seedGateway(runtime);
  app = await buildGateway(runtime, { heartbeatMs: 50 });
  await app.ready();
});

afterAll(async () => {
  await app.close();
  await runtime.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

function chat(content: string, opts: { stream?: boolean; agui?: boolean; resumable?: boolean } = {}) {
  return app.inject({
    method: 'POST',
    url: '/api/v1/chat/completions',
    headers: { ...(opts.agui ? { 'x-stream-protocol': 'agui' } : {}), ...(opts.resumable ? { 'x-agentry-resumable': 'true' } : {}) },
    payload: { model: 'relay', messages: [{ role: 'user', content }], stream: opts.stream ?? true },
  });
}

/** The `data:` of each SSE event (an `id:` line before it is left out; `ids` reads those). */
function events(body: string): unknown[] {
  return body
    .split('\n\n')
    .map((e) => e.replace(/^id: [^\n]*\n/, ''))
    .filter((e) => e.startsWith('data: '))
    .map((e) => (e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6))));
}

describe('agui tool events', () => {
  it('are relayed in order at choices[0].delta.tool_calls[0] with X-Stream-Protocol: agui', async () => {
    const res = await chat('tools', { agui: true });
    const tools = events(res.body)
      .map((e) => (e as { choices?: Array<{ delta: { tool_calls?: unknown[] } }> }).choices?.[0]?.delta.tool_calls?.[0])
      .filter(Boolean);
    expect(tools).toEqual([
      { type: 'TOOL_CALL_START', toolCallId: 'call_1', toolCallName: 'echo', arguments: '{"text":"hi"}', toolType: 'builtin' },
      { type: 'TOOL_CALL_RESULT', toolCallId: 'call_1', toolCallName: 'echo', content: 'hi', toolType: 'builtin' },
    ]);
    expect(events(res.body).at(-1)).toBe('[DONE]');
  });

  it('never appear without the header, in the stream or the non-stream body', async () => {
    const streamed = await chat('tools');
    expect(streamed.body).not.toMatch(/tool_calls|TOOL_CALL/);
    expect(streamed.body).toMatch(/The tool said hi\./);
    const plain = await chat('tools', { stream: false });
    expect(plain.json().choices[0].message).toEqual({ role: 'assistant', content: 'The tool said hi.', refusal: null });
  });
});

describe('the headers of a stream', () => {
  // What every answer of the app carries (its hooks set them on the reply), a stream included:
  // a browser on an allowed origin must be able to read it.
  const expected = {
    'access-control-allow-origin': 'https://app.example',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'content-security-policy': "default-src 'none'; frame-ancestors 'none'; sandbox",
    'content-type': 'text/event-stream',
  };
  const origin = { origin: 'https://app.example' };

  it.each([
    ['chat', '/api/v1/chat/completions', { model: 'relay', messages: [{ role: 'user', content: 'ok' }], stream: true }],
    ['Responses', '/api/v1/responses', { model: 'relay', input: 'ok', stream: true }],
  ])('are the app\'s own on a %s stream read from an allowed browser origin', async (_what, url, payload) => {
    const res = await app.inject({ method: 'POST', url, headers: origin, payload });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject(expected);
    expect(String(res.headers['vary'])).toMatch(/origin/i);
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    expect(res.headers['access-control-expose-headers']).toMatch(/x-request-id/);
  });

  it('give no other origin access to a stream', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', headers: { origin: 'https://evil.example' }, payload: { model: 'relay', messages: [{ role: 'user', content: 'ok' }], stream: true } });
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('failures', () => {
  it('after the first token: one error event, no [DONE]', async () => {
    const list = events((await chat('failing')).body);
    expect(list.at(-1)).toEqual({ error: { message: 'provider fake failed: 500', type: 'server_error', code: 502 } });
    expect(list).not.toContain('[DONE]');
  });

  it("before the first token, non-stream: the status and OpenAI's error object, not to be retried", async () => {
    const res = await chat('early', { stream: false });
    expect(res.statusCode).toBe(502);
    expect(res.json()).toEqual({ error: { message: 'Upstream failure: provider fake answered 500', type: 'server_error', param: null, code: 'run_failed' } });
    // The worker has retried the provider already: an SDK's own retries would run the agent again.
    expect(res.headers['x-should-retry']).toBe('false');
    const limited = await chat('early429', { stream: false });
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } });
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
  });

  it("answers OpenAI's error object on every OpenAI route, {error: string} on the management API", async () => {
    const unknownModel = await app.inject({ method: 'GET', url: '/api/v1/models/nope' });
    expect(unknownModel.statusCode).toBe(404);
    expect(unknownModel.json()).toEqual({ error: { message: 'Not found: model "nope"', type: 'invalid_request_error', param: null, code: 'not_found' } });
    const invalid = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { model: 'relay', messages: [] } });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toEqual({ error: { message: expect.stringMatching(/^Invalid input: body.messages/), type: 'invalid_request_error', param: 'messages', code: 'validation' } });
    const responses = await app.inject({ method: 'POST', url: '/api/v1/responses', payload: { model: 'nope', input: 'x' } });
    expect(responses.statusCode).toBe(404);
    expect(responses.json()).toMatchObject({ error: { message: 'Not found: agent "nope"', type: 'invalid_request_error' } });
    const management = await app.inject({ method: 'GET', url: '/api/v1/agents/nope' });
    expect(management.statusCode).toBe(404);
    expect(management.json()).toEqual({ error: expect.stringMatching(/nope/) });
  });

  it('before the first event, streamed: the same status and {error} as non-stream, no event stream', async () => {
    for (const [scenario, status] of [
      ['early', 502],
      ['early429', 429],
    ] as const) {
      const streamed = await chat(scenario);
      const plain = await chat(scenario, { stream: false });
      expect(streamed.statusCode).toBe(status);
      expect(plain.statusCode).toBe(status);
      expect(streamed.headers['content-type']).toMatch(/^application\/json/);
      expect(streamed.json()).toEqual(plain.json());
    }
  });

  it('after stream_headers_after_ms without an event: 200, keep-alive comments, then the failure in-stream', async () => {
    const res = await chat('slowfail');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.body).toMatch(/^: ping$/m);
    expect(events(res.body)).toEqual([
      expect.objectContaining({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }),
      { error: { message: 'Upstream failure: provider fake answered 500', type: 'server_error', code: 502 } },
    ]);
  });

  it("a provider retry is a ': retry' comment: it opens an Agentry client's stream at once, waits for another's headers, and is dropped once text overtook it", async () => {
    const COMMENT = ': retry {"attempt":2,"of":3,"reason":"provider unreachable"}\n\n';
    const answer = (body: string) => (events(body) as Array<{ choices?: Array<{ delta: { content?: string } }> }>).map((e) => e.choices?.[0]?.delta.content ?? '').join('');
    // Agentry's client: the role chunk, the notice, then the answer; the data lines are unchanged.
    const agentry = await chat('retried', { resumable: true });
    expect(agentry.statusCode).toBe(200);
    expect(agentry.body.indexOf(COMMENT)).toBeGreaterThan(agentry.body.indexOf('"role":"assistant"'));
    expect(agentry.body.indexOf(COMMENT)).toBeLessThan(agentry.body.indexOf('answered'));
    expect(answer(agentry.body)).toBe('answered');
    // Another client whose answer came before the headers' bound: no stale notice, the stream as before.
    const plain = await chat('retried');
    expect(plain.body).not.toContain(': retry');
    expect(answer(plain.body)).toBe('answered');
    // Another client whose answer came after it: the notice goes out with the headers.
    const late = await chat('retried:late');
    expect(late.body.indexOf(COMMENT)).toBeGreaterThan(-1);
    expect(late.body.indexOf(COMMENT)).toBeLessThan(late.body.indexOf('answered'));
    // The notice took no seq: the answer's text is still event 0.
    expect(late.body).toMatch(/^id: [0-9a-f]{32}:0\ndata: .*"content":"answered"/m);
    // Without a stream, nothing of it shows.
    expect((await chat('retried', { stream: false })).json()).toMatchObject({ choices: [{ message: { content: 'answered' } }] });
  });

  it('a run that answers with nothing still streams its role chunk and stop', async () => {
    const list = events((await chat('silent')).body) as Array<{ choices: Array<{ delta: unknown; finish_reason: string | null }> }>;
    expect(list.slice(0, -1).map((c) => c.choices[0])).toEqual([
      { index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null },
      { index: 0, delta: { content: '' }, finish_reason: 'stop' },
    ]);
    expect(list.at(-1)).toBe('[DONE]');
  });

  it('a gap in the events fails the stream instead of emitting a corrupted answer', async () => {
    const res = await chat('gap');
    const list = events(res.body);
    expect(list.at(-1)).toMatchObject({ error: { message: expect.stringMatching(/^part of the answer was lost on its way from the worker/) } });
    expect(res.body).not.toMatch(/"content":"c"/);
  });
});

describe('lost events', () => {
  it('a stream whose last events were lost ends with the rest of the stored answer', async () => {
    const list = events((await chat('lost')).body);
    const text = list.map((e) => (e as { choices?: Array<{ delta: { content?: string } }> }).choices?.[0]?.delta.content ?? '').join('');
    expect(text).toBe('partial answer');
    expect(list.at(-2)).toMatchObject({ choices: [{ delta: { content: '' }, finish_reason: 'stop' }] });
    expect(list.at(-1)).toBe('[DONE]');
  });

  it('a stream whose relayed text is not the start of the stored answer fails instead of mixing them', async () => {
    const list = events((await chat('lost:something else')).body);
    expect(list.at(-1)).toEqual({ error: { message: 'part of the answer was lost on its way from the worker; please retry', type: 'server_error', code: 503 } });
  });

  it('a non-stream request gets the stored answer and usage', async () => {
    const res = await chat('lost', { stream: false });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ choices: [{ message: { role: 'assistant', content: 'partial answer' }, finish_reason: 'stop' }], usage: { total_tokens: 5 } });
  });

  it('a failed run whose error event was lost (before any output): its stored error as 502 {error}, streamed or not', async () => {
    for (const stream of [true, false]) {
      const res = await chat('lostfail', { stream });
      expect(res.statusCode).toBe(502);
      expect(res.json().error).toMatchObject({ message: 'the provider broke', type: 'server_error' });
    }
  });
});

describe('keep-alive', () => {
  it('sends ": ping" comments while the run is silent', async () => {
    const res = await chat('slow');
    expect(res.body).toMatch(/^: ping$/m);
    expect(events(res.body).at(-1)).toBe('[DONE]');
  });

  it('a run for an unknown agent is 404 and nothing is enqueued', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { model: 'nope', messages: [{ role: 'user', content: 'x' }] } });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ message: 'Not found: agent "nope"', code: 'not_found' });
  });

  it('stores the finished run', async () => {
    const res = await chat('hello:world', { stream: false });
    const id = (res.json() as { id: string }).id.replace('chatcmpl-', '');
    await waitFor(async () => (await getRun(runtime.db.db, id)) !== undefined);
  });
});

describe('OpenAI fields: honoured or refused, never dropped', () => {
  const post = (payload: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { model: 'relay', messages: [{ role: 'user', content: 'ok' }], ...payload } });

  it('n > 1 is a 400 naming n; n = 1 is fine', async () => {
    const res = await post({ n: 2 });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/\bn\b/);
    expect((await post({ n: 1 })).statusCode).toBe(200);
  });

  it("the client's function tools, tool_choice and parallel_tool_calls are stored with the run request; malformed ones are a 400 saying why", async () => {
    const tool = { type: 'function', function: { name: 'f', description: 'F', parameters: { type: 'object' } } };
    const res = await post({ tools: [tool], tool_choice: { type: 'function', function: { name: 'f' } }, parallel_tool_calls: false });
    expect(res.statusCode).toBe(200);
    const run = await getRun(runtime.db.db, (res.json() as { id: string }).id.replace('chatcmpl-', ''));
    expect(run!.request).toMatchObject({ clientTools: [tool.function], toolChoice: { type: 'function', function: { name: 'f' } }, parallelToolCalls: false });
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ tool_choice: 'required' }, 'tool_choice: the request gives no tools to choose from'],
      [{ tools: [tool], tool_choice: { type: 'function', function: { name: 'g' } } }, `tool_choice: "g" is not one of the request's tools`],
      [{ functions: [tool.function] }, 'functions and function_call are deprecated by OpenAI and not supported: use tools and tool_choice'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0]: only function tools are supported (got type "web_search")'],
      [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name must be 1 to 64 letters, digits, underscores or dashes (got "has space")'],
      [{ tools: [tool, tool] }, 'tools: the name "f" is given twice'],
      [{ tools: [tool], parallel_tool_calls: 'yes' }, 'parallel_tool_calls must be a boolean'],
      [{ messages: [{ role: 'tool', content: 'r' }] }, 'messages[0].tool_call_id must name the tool call this message answers'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c' }] }] }, 'messages[0].tool_calls[0] must be {id, type: "function", function: {name, arguments}}'],
    ];
    for (const [fields, message] of refusals) {
      const refused = await post(fields);
      expect(refused.statusCode, JSON.stringify(fields)).toBe(400);
      expect(refused.json().error.message).toBe(`Invalid input: ${message}`);
    }
    for (const fields of [{ tools: [] }, { tool_choice: 'none' }, { tool_choice: 'auto' }, { tools: null, tool_choice: null }]) {
      const ok = await post(fields);
      expect(ok.statusCode, JSON.stringify(fields)).toBe(200);
      expect((await getRun(runtime.db.db, (ok.json() as { id: string }).id.replace('chatcmpl-', '')))!.request).not.toHaveProperty('clientTools');
    }
  });

  it('response_format is stored with the run request for the model call; a malformed one is a 400', async () => {
    const format = { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } } }, strict: true } };
    const res = await post({ response_format: format });
    expect(res.statusCode).toBe(200);
    const run = await getRun(runtime.db.db, (res.json() as { id: string }).id.replace('chatcmpl-', ''));
    expect((run!.request as { params?: unknown }).params).toEqual({ response_format: format });
    const text = await post({ response_format: { type: 'text' } });
    expect((await getRun(runtime.db.db, (text.json() as { id: string }).id.replace('chatcmpl-', '')))!.request).not.toHaveProperty('params');
    for (const bad of [{ type: 'yaml' }, { type: 'json_schema' }, 'json']) {
      const refused = await post({ response_format: bad });
      expect(refused.statusCode, JSON.stringify(bad)).toBe(400);
      expect(refused.json().error.message).toMatch(/response_format/);
    }
  });

  it("user is kept in the run's log line", async () => {
    const res = await post({ user: 'end-user-42' });
    const runId = (res.json() as { id: string }).id.replace('chatcmpl-', '');
    const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.runId === runId && l.msg === 'run enqueued');
    expect(line).toMatchObject({ user: 'end-user-42' });
  });
});
