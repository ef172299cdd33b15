import OpenAI, { APIError, AuthenticationError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModel } from '../src/fake-model.js';
import { freePort, spawnService } from '../src/process.js';

const tools: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const user = (content: string) => [{ role: 'user' as const, content }];

let fake: FakeModel;
let client: OpenAI;

beforeAll(async () => {
  fake = await startFakeModel();
  client = new OpenAI({ baseURL: fake.url, apiKey: 'sk-test-secret', maxRetries: 0 });
});
afterAll(() => fake.close());
afterEach(() => {
  const left = fake.pending();
  fake.reset();
  expect(left, 'every scripted reply was used').toBe(0);
});

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const out: ChatCompletionChunk[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

describe('fake model through the openai SDK', () => {
  it('lists models and answers non-stream with usage; records the request without the key', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['fake-model']);

    fake.script({ text: 'Hello there', usage: { prompt_tokens: 7, completion_tokens: 2 } });
    const res = await client.chat.completions.create({ model: 'gpt-x', messages: user('hi'), temperature: 0.2 });
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe('gpt-x');
    expect(res.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'Hello there' });
    expect(res.choices[0]!.finish_reason).toBe('stop');
    expect(res.usage).toEqual({ prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 });
    expect(res._request_id).toMatch(/^req_fake_/);

    // The default reply (empty queue) echoes the last user message.
    const echo = await client.chat.completions.create({ model: 'gpt-x', messages: [...user('first'), { role: 'assistant', content: 'x' }, ...user('echo me')] });
    expect(echo.choices[0]!.message.content).toBe('echo me');

    expect(fake.requests).toHaveLength(2);
    const [r] = fake.requests;
    expect(r!.hasAuthorization).toBe(true);
    expect(r!.headers.authorization).toBeUndefined();
    expect(JSON.stringify(r)).not.toContain('sk-test-secret');
    expect(r!.body).toMatchObject({ model: 'gpt-x', messages: user('hi'), temperature: 0.2 });
    expect(r!.completed).toBe(true);
  });

  it('streams text OpenAI-style: role first, finish_reason only on the last chunk, same id', async () => {
    fake.script({ text: ['Hel', 'lo', ' world'] });
    const chunks = await collect(await client.chat.completions.create({ model: 'm', messages: user('hi'), stream: true }));
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.map((c) => c.choices[0]!.delta.content ?? '').join('')).toBe('Hello world');
    expect(chunks.map((c) => c.choices[0]!.finish_reason)).toEqual([null, null, null, null, 'stop']);
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
  });

  it('sends the usage chunk (choices: []) last when include_usage is set', async () => {
    fake.script({ text: 'a b c', usage: { prompt_tokens: 5, completion_tokens: 3 } });
    const chunks = await collect(
      await client.chat.completions.create({ model: 'm', messages: user('hi'), stream: true, stream_options: { include_usage: true } }),
    );
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');
  });

  it('streams parallel tool calls interleaved by index; the SDK reassembles them', async () => {
    const calls = [
      { id: 'call_a', name: 'weather', arguments: '{"city":"Paris, île-de-France"}' },
      { name: 'time', arguments: '{"tz":"UTC"}' },
    ];
    fake.script({ toolCalls: calls, argumentChunks: 4 }, { toolCalls: calls, argumentChunks: 4 });

    // for await: accumulate by index.
    const chunks = await collect(await client.chat.completions.create({ model: 'm', messages: user('weather?'), tools, stream: true }));
    const acc: { id?: string; name?: string; args: string }[] = [];
    for (const c of chunks) {
      for (const tc of c.choices[0]?.delta.tool_calls ?? []) {
        const slot = (acc[tc.index] ??= { args: '' });
        if (tc.id) slot.id = tc.id;
        if (tc.function?.name) slot.name = tc.function.name;
        slot.args += tc.function?.arguments ?? '';
      }
    }
    expect(acc).toEqual([
      { id: 'call_a', name: 'weather', args: calls[0]!.arguments },
      { id: expect.stringMatching(/^call_fake_/), name: 'time', args: calls[1]!.arguments },
    ]);
    const indexes = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls?.map((t) => t.index) ?? []);
    expect(indexes.slice(0, 4)).toEqual([0, 1, 0, 1]); // interleaved
    expect(chunks[0]!.choices[0]!.delta).toMatchObject({ role: 'assistant', content: null });
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');

    // The SDK's stream helper.
    const final = await client.chat.completions.stream({ model: 'm', messages: user('weather?'), tools }).finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(final.choices[0]!.message.tool_calls?.map((t) => (t.type === 'function' ? [t.function.name, JSON.parse(t.function.arguments)] : null))).toEqual([
      ['weather', { city: 'Paris, île-de-France' }],
      ['time', { tz: 'UTC' }],
    ]);
  });

  it('answers from a function entry (a tool loop) and can omit finish_reason', async () => {
    fake.script({ toolCalls: [{ id: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' }], omitFinishReason: true }, (req) => {
      const tool = req.body.messages.find((m) => m.role === 'tool');
      return { text: `It is ${String(tool?.content)} (${String(tool?.tool_call_id)})` };
    });
    const chunks = await collect(await client.chat.completions.create({ model: 'm', messages: user('weather?'), tools, stream: true }));
    expect(chunks.every((c) => c.choices[0]!.finish_reason === null)).toBe(true);

    const res = await client.chat.completions.create({
      model: 'm',
      tools,
      messages: [
        ...user('weather?'),
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ],
    });
    expect(res.choices[0]!.message.content).toBe('It is sunny (c1)');
  });

  it('non-stream tool calls come back as one message', async () => {
    fake.script({ toolCalls: [{ id: 'c9', name: 'time', arguments: '{}' }] });
    const res = await client.chat.completions.create({ model: 'm', messages: user('t'), tools });
    expect(res.choices[0]!.finish_reason).toBe('tool_calls');
    expect(res.choices[0]!.message.content).toBeNull();
    expect(res.choices[0]!.message.tool_calls).toEqual([{ id: 'c9', type: 'function', function: { name: 'time', arguments: '{}' } }]);
  });

  it('fails before the first byte with the scripted status', async () => {
    fake.script({ status: 500 }, { status: 429, body: { error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } }, headers: { 'retry-after': '1' } });
    const e500 = await client.chat.completions.create({ model: 'm', messages: user('x'), stream: true }).catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(APIError);
    expect((e500 as APIError).status).toBe(500);
    const e429 = await client.chat.completions.create({ model: 'm', messages: user('x') }).catch((e: unknown) => e);
    expect((e429 as APIError).status).toBe(429);
    expect((e429 as APIError).message).toContain('slow down');
    expect((e429 as APIError).headers?.get('retry-after')).toBe('1');
  });

  it('a mid-stream break surfaces as an error after the chunks that were sent', async () => {
    fake.script({ text: ['a', 'b', 'c', 'd', 'e'], failAfterChunks: 3 }, { failAfterChunks: 2 });
    const got: string[] = [];
    const err = await (async () => {
      for await (const c of await client.chat.completions.create({ model: 'm', messages: user('x'), stream: true })) got.push(c.choices[0]?.delta.content ?? '');
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(got).toEqual(['', 'a', 'b']);

    // Non-stream: the socket is destroyed without a response.
    const e2 = await client.chat.completions.create({ model: 'm', messages: user('x') }).catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(APIError);
    expect(fake.requests.some((r) => r.aborted)).toBe(false);
  });

  it('records a client abort within a second (hung request and mid-stream)', async () => {
    fake.script({ hang: true }, { text: Array.from({ length: 100 }, (_, i) => `t${i} `), chunkDelayMs: 20 });

    const ac = new AbortController();
    const p = client.chat.completions.create({ model: 'm', messages: user('x') }, { signal: ac.signal }).catch((e: unknown) => e);
    await fake.waitForRequest(1);
    const t0 = Date.now();
    ac.abort();
    const aborted = await fake.waitForAbort({ index: 0, timeoutMs: 1_000 });
    expect(aborted.abortedAt! - t0).toBeLessThan(1_000);
    expect(await p).toBeInstanceOf(Error);

    const ac2 = new AbortController();
    const stream = await client.chat.completions.create({ model: 'm', messages: user('x'), stream: true }, { signal: ac2.signal });
    let n = 0;
    const t1 = await (async () => {
      for await (const _ of stream) {
        if (++n === 3) {
          const t = Date.now();
          ac2.abort();
          return t;
        }
      }
      return 0;
    })().catch(() => Date.now());
    const r2 = await fake.waitForAbort({ index: 1, timeoutMs: 1_000 });
    expect(r2.abortedAt! - t1).toBeLessThan(1_000);
    expect(r2.completed).toBe(false);
  });

  it('waits delayMs before the first byte', async () => {
    fake.script({ text: 'late', delayMs: 150 });
    const t0 = performance.now();
    await client.chat.completions.create({ model: 'm', messages: user('x') });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
  });

  it('checks the key when given one', async () => {
    const keyed = await startFakeModel({ apiKey: 'right' });
    try {
      const wrong = new OpenAI({ baseURL: keyed.url, apiKey: 'wrong', maxRetries: 0 });
      await expect(wrong.chat.completions.create({ model: 'm', messages: user('x') })).rejects.toBeInstanceOf(AuthenticationError);
      const right = new OpenAI({ baseURL: keyed.url, apiKey: 'right', maxRetries: 0 });
      expect((await right.chat.completions.create({ model: 'm', messages: user('ok') })).choices[0]!.message.content).toBe('ok');
    } finally {
      await keyed.close();
    }
  });
});

describe('fake model wire format', () => {
  it('frames a small stream byte for byte', async () => {
    fake.script({ text: ['Hi', '!'], usage: { prompt_tokens: 1, completion_tokens: 2 } });
    const res = await fetch(`${fake.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: user('x'), stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const text = await res.text();
    const r = fake.requests[0]!;
    expect(r.hasAuthorization).toBe(false);
    const { id } = JSON.parse(text.slice(6, text.indexOf('\n'))) as { id: string };
    const created = Math.floor(r.receivedAt / 1000);
    const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"m","system_fingerprint":null,"choices":`;
    const choice = (delta: string, finish: string) => `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}}],"usage":null}`;
    expect(text).toBe(
      `data: ${head}${choice('{"role":"assistant","content":"","refusal":null}', 'null')}\n\n` +
        `data: ${head}${choice('{"content":"Hi"}', 'null')}\n\n` +
        `data: ${head}${choice('{"content":"!"}', 'null')}\n\n` +
        `data: ${head}${choice('{}', '"stop"')}\n\n` +
        `data: ${head}[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n` +
        `data: [DONE]\n\n`,
    );
  });

  it('stalls a stream after hangAfterChunks chunks until the client leaves', async () => {
    fake.script({ text: ['a', 'b', 'c'], hangAfterChunks: 2 });
    const ac = new AbortController();
    const res = await fetch(`${fake.url}/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm', messages: user('x'), stream: true }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    let text = '';
    while (text.split('\n\n').length < 3) text += new TextDecoder().decode((await reader.read()).value);
    expect(text.match(/^data: /gm)).toHaveLength(2);
    expect(text).toContain('"content":"a"');
    ac.abort();
    const r = await fake.waitForAbort({ timeoutMs: 1_000 });
    expect(r).toMatchObject({ aborted: true, completed: false });
  });

  it('answers unknown routes and bad JSON with OpenAI error bodies', async () => {
    const nf = await fetch(`${fake.url}/nope`);
    expect(nf.status).toBe(404);
    expect(await nf.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
    const bad = await fetch(`${fake.url}/chat/completions`, { method: 'POST', body: '{nope' });
    expect(bad.status).toBe(400);
    expect(fake.requests).toHaveLength(0);
  });

  it('runs alone from its CLI with a canned stream', async () => {
    const port = await freePort();
    const svc = spawnService('libs/testing/src/fake-model-cli.ts', { env: { PORT: String(port), FAKE_TOKENS: '5' } });
    try {
      const line = await svc.waitForLine(/listening on/);
      expect(line).toContain(`http://127.0.0.1:${port}/v1`);
      const cli = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 });
      const chunks = await collect(await cli.chat.completions.create({ model: 'm', messages: user('x'), stream: true }));
      expect(chunks.map((c) => c.choices[0]!.delta.content ?? '').join('')).toBe('tok0 tok1 tok2 tok3 tok4 ');
    } finally {
      expect(await svc.stop()).toBe(0);
    }
  });
});
