import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { PubSubChannels } from '@agentry/contracts';
import { deleteProvider, insertProvider, updateProvider, type DbHandle, type ProviderModel } from '@agentry/db';
import { hasCode, Errors } from '@agentry/errors';
import { Sealer } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel } from '@agentry/testing';
import { ADD_PROVIDER_FIX, ModelProviders, type ModelCallRequest, type ModelEvent, type ModelTimeouts } from '../src/index.js';
import { defaultModelOf, resolveModel } from '@agentry/definitions';

/** The provider client against the fake OpenAI server: streaming, retries, failover, timeouts, abort. */

const KEY_A = 'sk-provider-a-0123456789-secret';
const KEY_B = 'sk-provider-b-0123456789-secret';

const secrets = new Sealer('test-master-key-0123456789-abcdefghij');
const logLines: string[] = [];
const logger = pino({ level: 'debug' }, { write: (l: string) => void logLines.push(l) });

let handle: DbHandle;
let bus: Bus;
let fakeA: FakeModel;
let fakeB: FakeModel;
let defaultProvider = 'a';
const open: ModelProviders[] = [];

beforeAll(async () => {
  handle = await createTestPglite();
  bus = createMemoryBus({ logger });
  fakeA = await startFakeModel({ apiKey: KEY_A });
  fakeB = await startFakeModel({ apiKey: KEY_B });
  await addProvider('a', fakeA.url, KEY_A, [{ name: 'model-a1', alias: 'default' }, { name: 'model-a2', alias: 'fast' }]);
  await addProvider('b', fakeB.url, KEY_B, [], 'model-b');
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
  fakeA.reset();
  fakeB.reset();
  defaultProvider = 'a';
});

afterAll(async () => {
  await fakeA?.close();
  await fakeB?.close();
  await bus?.close();
  await handle?.close();
  // Whatever happened above, no key reached a log line.
  expect(logLines.join('\n')).not.toContain(KEY_A);
  expect(logLines.join('\n')).not.toContain(KEY_B);
});

async function addProvider(id: string, baseUrl: string, key: string | null, models: ProviderModel[], model = ''): Promise<void> {
  await insertProvider(handle.db, { id, name: id, baseUrl, model, models, apiKeySealed: key ? secrets.seal(key) : null, fileHmac: null });
}

async function providers(timeouts: Partial<ModelTimeouts> = {}): Promise<ModelProviders> {
  const p = new ModelProviders({
    db: handle.db,
    secrets,
    config: () => ({ models: { default_provider: defaultProvider } }),
    bus,
    logger,
    timeouts: { backoffMs: 10, ...timeouts },
  });
  await p.start();
  open.push(p);
  return p;
}

function request(extra: Partial<ModelCallRequest> = {}): ModelCallRequest {
  return { messages: [{ role: 'user', content: 'hello there' }], signal: new AbortController().signal, ...extra };
}

async function collect(stream: AsyncIterable<ModelEvent>): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

/** Runs the stream to its end; answers the events seen and the error it ended with. */
async function settle(stream: AsyncIterable<ModelEvent>): Promise<{ events: ModelEvent[]; error: Error | undefined }> {
  const events: ModelEvent[] = [];
  try {
    for await (const ev of stream) events.push(ev);
    return { events, error: undefined };
  } catch (err) {
    return { events, error: err as Error };
  }
}

const text = (events: ModelEvent[]) =>
  events
    .filter((e): e is Extract<ModelEvent, { type: 'text' }> => e.type === 'text')
    .map((e) => e.text)
    .join('');

describe('model names', () => {
  it('resolves the default model and names or aliases', () => {
    const p = { model: '', models: [{ name: 'm1' }, { name: 'm2', alias: 'default' }, { name: 'm3', alias: 'fast' }] };
    expect(defaultModelOf(p)).toBe('m2');
    expect(defaultModelOf({ model: 'x', models: p.models })).toBe('x');
    expect(defaultModelOf({ model: '', models: [{ name: 'first' }] })).toBe('first');
    expect(resolveModel(p)).toBe('m2');
    expect(resolveModel(p, 'default')).toBe('m2');
    expect(resolveModel(p, 'fast')).toBe('m3');
    expect(resolveModel(p, 'm1')).toBe('m1');
    expect(resolveModel(p, 'nope')).toBeUndefined();
    expect(resolveModel({ model: 'big', models: [] }, 'anything')).toBe('anything');
    expect(resolveModel({ model: '', models: [] })).toBeUndefined();
  });
});

describe('ModelProviders.stream', () => {
  it('streams text, then done with provider, model and usage; sends what the request asked for', async () => {
    const p = await providers();
    fakeA.script({ text: 'Hello from the fake model', usage: { prompt_tokens: 7, completion_tokens: 5 } });
    const events = await collect(
      p.stream(request({ model: 'fast', params: { temperature: 0.2, max_tokens: 50, stop: ['END'] }, tools: [{ type: 'function', function: { name: 't' } }] })),
    );
    expect(text(events)).toBe('Hello from the fake model');
    expect(events.at(-1)).toEqual({
      type: 'done',
      finishReason: 'stop',
      provider: 'a',
      model: 'model-a2',
      usage: { promptTokens: 7, completionTokens: 5, totalTokens: 12 },
    });
    const sent = fakeA.requests[0]!;
    expect(sent.hasAuthorization).toBe(true);
    expect(sent.body).toMatchObject({
      model: 'model-a2',
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      max_tokens: 50,
      stop: ['END'],
      tools: [{ type: 'function', function: { name: 't' } }],
      messages: [{ role: 'user', content: 'hello there' }],
    });
  });

  it('uses models.default_provider and its default model when the request names none', async () => {
    const p = await providers();
    defaultProvider = 'b';
    const events = await collect(p.stream(request()));
    expect(events.at(-1)).toMatchObject({ type: 'done', provider: 'b', model: 'model-b' });
    expect(fakeB.requests).toHaveLength(1);
  });

  it('assembles streamed tool calls by index, once, before done', async () => {
    const p = await providers();
    fakeA.script({
      text: 'Let me look.',
      toolCalls: [
        { id: 'call_1', name: 'search', arguments: '{"query":"weather in Paris","limit":3}' },
        { id: 'call_2', name: 'read_file', arguments: '{"path":"notes/today.md"}' },
      ],
      argumentChunks: 4,
    });
    const events = await collect(p.stream(request()));
    expect(events.map((e) => e.type)).toEqual(['text', 'text', 'text', 'tool_calls', 'done']);
    expect(events[3]).toEqual({
      type: 'tool_calls',
      calls: [
        { id: 'call_1', name: 'search', arguments: '{"query":"weather in Paris","limit":3}' },
        { id: 'call_2', name: 'read_file', arguments: '{"path":"notes/today.md"}' },
      ],
    });
    expect(events[4]).toMatchObject({ type: 'done', finishReason: 'tool_calls' });
  });

  it('assembles tool calls also when the provider never sends a finish_reason', async () => {
    const p = await providers();
    fakeA.script({ toolCalls: [{ id: 'c', name: 'now', arguments: '{}' }], omitFinishReason: true });
    const events = await collect(p.stream(request()));
    expect(events).toEqual([
      { type: 'tool_calls', calls: [{ id: 'c', name: 'now', arguments: '{}' }] },
      expect.objectContaining({ type: 'done', finishReason: 'tool_calls' }),
    ]);
  });

  it('forwards the unsealed key; a wrong key is a 502 naming the provider and status, never the key', async () => {
    const p = await providers();
    await collect(p.stream(request()));
    expect(fakeA.requests[0]?.hasAuthorization).toBe(true);

    await addProvider('wrongkey', fakeA.url, KEY_B, [], 'm');
    const { error } = await settle(p.stream(request({ provider: 'wrongkey' })));
    expect(hasCode(error, Errors.UPSTREAM)).toBe(true);
    expect(error?.message).toMatch(/^Upstream failure: provider "wrongkey" \(model m\): HTTP 401/);
    expect(error?.message).not.toContain(KEY_B);
    // 401 is not retried (the fake records no request it refused, so count the failures logged).
    expect(logLines.filter((l) => l.includes('model provider call failed') && l.includes('"provider":"wrongkey"'))).toHaveLength(1);
    await deleteProvider(handle.db, 'wrongkey');
  });

  it('retries a 5xx before the first token, with backoff, then answers', async () => {
    const p = await providers();
    fakeA.script({ status: 500 }, { status: 503 }, { text: 'third time lucky' });
    const events = await collect(p.stream(request()));
    expect(text(events)).toBe('third time lucky');
    expect(fakeA.requests).toHaveLength(3);
    // Each retry is announced before its backoff, for the person waiting (issue 42).
    expect(events.filter((e) => e.type === 'retry')).toEqual([
      { type: 'retry', attempt: 2, of: 3, reason: 'provider error (HTTP 500)' },
      { type: 'retry', attempt: 3, of: 3, reason: 'provider error (HTTP 503)' },
    ]);
    expect(events.findIndex((e) => e.type === 'retry' && e.attempt === 3)).toBeLessThan(events.findIndex((e) => e.type === 'text'));
  });

  it('announces a retry of an unreachable provider, and none when no attempt follows', async () => {
    await addProvider('down', 'http://127.0.0.1:1', null, [], 'm');
    try {
      const p = await providers({ retries: 1 });
      const { events, error } = await settle(p.stream(request({ provider: 'down' })));
      expect(error?.message).toMatch(/provider "down".*\(2 attempts\)/);
      // Attempt 2 of 2 is announced; after it fails nothing more is tried, so nothing more is announced.
      expect(events).toEqual([{ type: 'retry', attempt: 2, of: 2, reason: 'provider unreachable' }]);
    } finally {
      await deleteProvider(handle.db, 'down');
    }
  });

  it('retries 429 and 408, but not 400', async () => {
    const p = await providers();
    fakeA.script({ status: 429, headers: { 'retry-after-ms': '20' } }, { status: 408 }, { text: 'ok' });
    expect(text(await collect(p.stream(request())))).toBe('ok');
    expect(fakeA.requests).toHaveLength(3);

    fakeA.reset();
    fakeA.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error' } } });
    const { error } = await settle(p.stream(request()));
    expect(error?.message).toBe('Upstream failure: provider "a" (model model-a1): HTTP 400: context too long');
    expect(fakeA.requests).toHaveLength(1);
  });

  it('fails over to the next provider when the first keeps failing', async () => {
    const p = await providers({ retries: 1 });
    fakeA.script({ status: 500 }, { status: 502 });
    const events = await collect(p.stream(request({ provider: 'a', failover: [{ provider: 'nope' }, { provider: 'b' }] })));
    expect(text(events)).toBe('hello there');
    expect(events.at(-1)).toMatchObject({ type: 'done', provider: 'b', model: 'model-b' });
    expect(fakeA.requests).toHaveLength(2);
    expect(fakeB.requests).toHaveLength(1);
    expect(logLines.some((l) => l.includes('failover entry skipped') && l.includes('unknown model provider \\"nope\\"'))).toBe(true);
  });

  it('names every provider tried when all fail', async () => {
    const p = await providers({ retries: 0 });
    fakeA.script({ status: 500 });
    fakeB.script({ status: 503, body: { error: { message: 'overloaded' } } });
    const { error } = await settle(p.stream(request({ failover: [{ provider: 'b' }] })));
    expect(error?.message).toBe(
      'Upstream failure: provider "a" (model model-a1): HTTP 500: fake error 500; provider "b" (model model-b): HTTP 503: overloaded',
    );
  });

  it('never retries once a token was yielded: the break is thrown', async () => {
    const p = await providers();
    fakeA.script({ failAfterChunks: 3 });
    const { events, error } = await settle(p.stream(request({ failover: [{ provider: 'b' }] })));
    expect(text(events)).toBe('part0 part1 ');
    expect(hasCode(error, Errors.UPSTREAM)).toBe(true);
    expect(error?.message).toMatch(/^Upstream failure: provider "a" \(model model-a1\): the answer broke off after it had started/);
    expect(fakeA.requests).toHaveLength(1);
    expect(fakeB.requests).toHaveLength(0);
  });

  it('fails a stream that ends without [DONE] and without a finish_reason (cut off), and keeps one that sent [DONE]', async () => {
    const p = await providers();
    fakeA.script({ text: ['one ', 'two ', 'three ', 'four'], endAfterChunks: 3 });
    const { events, error } = await settle(p.stream(request()));
    expect(text(events)).toBe('one two ');
    expect(hasCode(error, Errors.UPSTREAM)).toBe(true);
    expect(error?.message).toMatch(/the answer broke off after it had started: .*ended without \[DONE\] and without a finish_reason/);
    // [DONE] without a finish_reason (some providers): finished.
    fakeA.script({ text: ['all ', 'there'], omitFinishReason: true });
    const ok = await settle(p.stream(request()));
    expect(ok.error).toBeUndefined();
    expect(text(ok.events)).toBe('all there');
    expect(ok.events.at(-1)).toMatchObject({ type: 'done', finishReason: 'stop' });
  });

  it('times out when no first token comes: a server that never answers, or that stalls after the headers', async () => {
    const p = await providers({ firstTokenMs: 300, retries: 1 });
    fakeA.script({ hang: true }, { text: 'late', delayMs: 5_000 });
    const { error } = await settle(p.stream(request()));
    expect(error?.message).toBe('Upstream failure: provider "a" (model model-a1): no first token within 300 ms (2 attempts)');
    expect(fakeA.requests).toHaveLength(2);
    // Both requests were given up (the connection closed), not left hanging.
    await fakeA.waitForAbort({ index: 0, timeoutMs: 1_000 });
    await fakeA.waitForAbort({ index: 1, timeoutMs: 1_000 });

    fakeA.reset();
    fakeA.script({ text: 'never finished', hangAfterChunks: 1 }, { text: 'after the stall' });
    expect(text(await collect(p.stream(request())))).toBe('after the stall');
  });

  it('bounds the whole call (totalMs) and the silence between chunks (firstTokenMs)', async () => {
    const p = await providers({ totalMs: 400, firstTokenMs: 300 });
    fakeA.script({ text: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 50 });
    const slow = await settle(p.stream(request()));
    expect(text(slow.events)).toMatch(/^w0 w1 /);
    expect(slow.error?.message).toBe(
      'Upstream failure: provider "a" (model model-a1): the answer broke off after it had started: the call took longer than 400 ms',
    );

    fakeA.reset();
    fakeA.script({ text: 'one two three four five', hangAfterChunks: 3 });
    const stalled = await settle(p.stream(request()));
    expect(text(stalled.events)).toBe('one two ');
    expect(stalled.error?.message).toBe('Upstream failure: provider "a" (model model-a1): the answer broke off after it had started: no data for 300 ms');
  });

  it("aborts the HTTP request at once when the caller's signal fires (waiting, and mid-stream)", async () => {
    const p = await providers();
    fakeA.script({ hang: true });
    const ctl = new AbortController();
    const pending = settle(p.stream(request({ signal: ctl.signal })));
    await fakeA.waitForRequest(1);
    ctl.abort(new Error('the client went away'));
    const aborted = await fakeA.waitForAbort({ index: 0, timeoutMs: 1_000 });
    expect(aborted.aborted).toBe(true);
    const { error } = await pending;
    expect(error?.message).toBe('the client went away');
    expect(fakeA.requests).toHaveLength(1);

    fakeA.reset();
    fakeA.script({ text: Array.from({ length: 50 }, (_, i) => `w${i} `), chunkDelayMs: 100 });
    const ctl2 = new AbortController();
    const events: ModelEvent[] = [];
    await expect(
      (async () => {
        for await (const ev of p.stream(request({ signal: ctl2.signal }))) {
          events.push(ev);
          if (events.length === 2) ctl2.abort(new Error('stop now'));
        }
      })(),
    ).rejects.toThrow('stop now');
    await fakeA.waitForAbort({ index: 0, timeoutMs: 1_000 });
  });

  it('closes the request when the caller stops reading early', async () => {
    const p = await providers();
    fakeA.script({ text: Array.from({ length: 50 }, (_, i) => `w${i} `), chunkDelayMs: 50 });
    for await (const ev of p.stream(request())) if (ev.type === 'text') break;
    await fakeA.waitForAbort({ index: 0, timeoutMs: 1_000 });
  });

  it('refuses an unknown provider or model, naming it', async () => {
    const p = await providers();
    const unknownProvider = await settle(p.stream(request({ provider: 'ghost' })));
    expect(hasCode(unknownProvider.error, Errors.VALIDATION)).toBe(true);
    expect(unknownProvider.error?.message).toBe(`Invalid input: unknown model provider "ghost"; ${ADD_PROVIDER_FIX}`);
    const unknownModel = await settle(p.stream(request({ model: 'gpt-9' })));
    expect(unknownModel.error?.message).toBe('Invalid input: model provider "a" has no model "gpt-9" (it has model-a1, default, model-a2, fast)');
    defaultProvider = '';
    const none = await settle(p.stream(request()));
    expect(none.error?.message).toBe(
      'Invalid input: no model provider: the agent names none and models.default_provider is not set; add one with `agentry providers add <id> --base-url <url> --default` or on the web UI\'s Model providers page (/providers)',
    );
    expect(fakeA.requests).toHaveLength(0);
  });

  it('reports a provider that cannot be reached', async () => {
    const p = await providers({ retries: 1 });
    await addProvider('down', 'http://127.0.0.1:9/v1', null, [], 'm');
    const { error } = await settle(p.stream(request({ provider: 'down' })));
    // Said once: Node's message already carries the code.
    expect(error?.message).toMatch(/^Upstream failure: provider "down" \(model m\): connection failed: connect ECONNREFUSED 127\.0\.0\.1:9 \(2 attempts\)$/);
    expect(error?.message.match(/ECONNREFUSED/g)).toHaveLength(1);
    await deleteProvider(handle.db, 'down');
  });

  it('keeps the client cached until an invalidation, then rebuilds it with the new key', async () => {
    const p = await providers({ retries: 0 });
    await addProvider('rotating', fakeB.url, KEY_A, [], 'm');
    const before = await settle(p.stream(request({ provider: 'rotating' })));
    expect(before.error?.message).toMatch(/HTTP 401/);

    await updateProvider(handle.db, 'rotating', { apiKeySealed: secrets.seal(KEY_B) });
    // Not told yet: the cached client still holds the old key.
    expect((await settle(p.stream(request({ provider: 'rotating' })))).error?.message).toMatch(/HTTP 401/);

    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'providers', id: 'rotating' });
    await new Promise((r) => setTimeout(r, 50));
    const after = await collect(p.stream(request({ provider: 'rotating' })));
    expect(after.at(-1)).toMatchObject({ type: 'done', provider: 'rotating' });
    await deleteProvider(handle.db, 'rotating');
  });
});
