import OpenAI, { APIError } from 'openai';
import { expect, it } from 'vitest';
import type { FakeModel } from '@agentry/testing';
import { waitFor } from '@agentry/testing';
import { assertValid } from './openai-schema.js';

/** What a deployment under test offers the conformance suite. */
export interface ChatTarget {
  /** `http://host:port/api/v1` */
  baseURL: string;
  /** An `api`-platform account key. */
  apiKey: string;
  fake: FakeModel;
  /** An agent on the fake provider with system prompt SYSTEM_PROMPT. */
  agentId: string;
  /** The stored status of a run (`queued`, `running`, `succeeded`, `failed`, `cancelled`). */
  runStatus(runId: string): Promise<string | undefined>;
}

export const SYSTEM_PROMPT = 'You are the conformance agent.';
export const API_KEY = 'sk-conformance-account-0123456789';

/** The provider config every target uses: the fake, with a key the fake insists on. */
export const PROVIDER_KEY = 'sk-fake-provider-key-0123456789';

export function agentDsl(id: string) {
  return {
    ruleChain: { id, name: `Agent ${id}` },
    metadata: {
      nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model', systemPrompt: SYSTEM_PROMPT } }],
      connections: [],
    },
  };
}

const runIdOf = (completionId: string) => completionId.replace(/^chatcmpl-/, '');

/** Server-sent events as written: each one's `id:` (if any) and its `data:`. */
export function parseSse(text: string): Array<{ id?: string; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => /^(id|data):/m.test(block))
    .map((block) => {
      const lines = block.split('\n');
      const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
      const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      return id === undefined ? { data } : { id, data };
    });
}

/** The text of the content deltas of chat chunk events (`[DONE]` and others left out). */
function contentOf(events: Array<{ data: string }>): string {
  return events
    .filter((e) => e.data !== '[DONE]')
    .map((e) => (JSON.parse(e.data) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '')
    .join('');
}

/**
 * Reads a streamed chat's SSE body until `enough` says so, then drops the connection (a client
 * whose network went away): what it got, whole events only.
 */
async function readUntil(res: Response, enough: (events: Array<{ id?: string; data: string }>) => boolean, controller: AbortController) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    const whole = text.slice(0, text.lastIndexOf('\n\n') + 2);
    if (enough(parseSse(whole))) {
      controller.abort();
      return parseSse(whole);
    }
  }
  return parseSse(text);
}

/**
 * The OpenAI-client conformance suite: the official SDK (and raw fetch for the bytes) against a
 * deployment, with the fake model scripted per test. Registered inside the caller's describe.
 * Every completion, stream chunk, model list and model it reads is checked against OpenAI's own
 * schemas (`assertValid`), error bodies included (OpenAI's ErrorResponse on these routes); stream
 * error events keep their numeric `code`, and AG-UI tool deltas are the spec's, not OpenAI's
 * `tool_calls` (the suite reads no `agui` stream).
 */
export function chatConformance(target: () => ChatTarget): void {
  const client = () => new OpenAI({ baseURL: target().baseURL, apiKey: target().apiKey, maxRetries: 0, timeout: 20_000 });
  const user = (content: string) => [{ role: 'user' as const, content }];

  it('answers a non-stream request in the chat.completion shape', async () => {
    const t = target();
    t.fake.script({ text: 'Hello there', usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } });
    const res = await client().chat.completions.create({ model: t.agentId, messages: user('hi') });
    expect(res.id).toMatch(/^chatcmpl-/);
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe(t.agentId);
    expect(Number.isInteger(res.created)).toBe(true);
    expect(res.choices).toEqual([{ index: 0, message: { role: 'assistant', content: 'Hello there', refusal: null }, logprobs: null, finish_reason: 'stop' }]);
    assertValid('CreateChatCompletionResponse', res);
    expect(res.usage).toEqual({ prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 });
    // The provider saw the agent's system prompt, then the user's message, with its key.
    const seen = t.fake.requests.at(-1)!;
    expect(seen.body.messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'hi' },
    ]);
    expect(seen.hasAuthorization).toBe(true);
    expect(await t.runStatus(runIdOf(res.id))).toBe('succeeded');
  });

  it('streams with for await: role first, same id on every chunk, stop at the end', async () => {
    const t = target();
    t.fake.script({ text: ['Once ', 'upon ', 'a time'] });
    const stream = await client().chat.completions.create({ model: t.agentId, messages: user('story'), stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) assertValid('CreateChatCompletionStreamResponse', chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(new Set(chunks.map((c) => c.created)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === t.agentId)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Once upon a time');
    const last = chunks.at(-1)!;
    expect(last.choices[0]).toMatchObject({ delta: { content: '' }, finish_reason: 'stop' });
    expect(chunks.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null)).toBe(true);
  });

  it('works with the SDK stream helper and finalChatCompletion()', async () => {
    const t = target();
    t.fake.script({ text: ['a', 'b', 'c'] });
    const runner = client().chat.completions.stream({ model: t.agentId, messages: user('abc') });
    const deltas: string[] = [];
    runner.on('content', (d) => deltas.push(d));
    const final = await runner.finalChatCompletion();
    expect(deltas.join('')).toBe('abc');
    expect(final.choices[0]!.message.content).toBe('abc');
    expect(final.choices[0]!.finish_reason).toBe('stop');
  });

  it('adds a usage chunk with stream_options.include_usage', async () => {
    const t = target();
    t.fake.script({ text: ['x', 'y'], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
    const stream = await client().chat.completions.create({
      model: t.agentId,
      messages: user('u'),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) assertValid('CreateChatCompletionStreamResponse', chunk);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 });
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');
  });

  it('maps a provider failure before the first token to 502, streamed or not (SDKs see the status)', async () => {
    const t = target();
    const fail = { status: 500, body: { error: { message: 'upstream exploded' } } };
    t.fake.script(fail, fail, fail, fail, fail, fail);
    const err = await client()
      .chat.completions.create({ model: t.agentId, messages: user('x') })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(502);
    t.fake.reset();
    t.fake.script(fail, fail, fail, fail, fail, fail);
    const failed = await client()
      .chat.completions.create({ model: t.agentId, messages: user('x'), stream: true })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(APIError);
    expect((failed as APIError).status).toBe(502);
    expect((failed as APIError).message).toMatch(/upstream exploded/);
    t.fake.reset();
  });

  it("tells Agentry's client of a provider retry as an SSE comment, the data lines OpenAI's and no seq consumed (issue 42)", async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ status: 503, body: { error: { message: 'warming up' } } }, { text: ['back ', 'again'] });
    const res = await fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}`, 'x-agentry-resumable': 'true' },
      body: JSON.stringify({ model: t.agentId, messages: user('x'), stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const retry = text.indexOf(': retry {"attempt":2,"of":3,"reason":"provider error (HTTP 503)"}\n\n');
    expect(retry).toBeGreaterThan(-1);
    expect(retry).toBeLessThan(text.indexOf('"content":"back "'));
    const events = parseSse(text);
    expect(contentOf(events)).toBe('back again');
    // The answer's first event is still seq 0: a retry notice is no output (take-over, resume).
    expect(events.find((e) => e.id)?.id).toMatch(/:0$/);
    for (const e of events.slice(0, -1)) assertValid('CreateChatCompletionStreamResponse', JSON.parse(e.data));
    // The OpenAI SDK reads the same kind of stream as if nothing had happened.
    t.fake.script({ status: 503 }, { text: 'fine' });
    const stream = await client().chat.completions.create({ model: t.agentId, messages: user('x'), stream: true }, { headers: { 'x-agentry-resumable': 'true' } });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(content).toBe('fine');
    t.fake.reset();
  });

  it('fails the stream cleanly when the provider breaks after the first token', async () => {
    const t = target();
    t.fake.script({ text: ['one ', 'two ', 'three ', 'four'], failAfterChunks: 3 });
    const stream = await client().chat.completions.create({ model: t.agentId, messages: user('x'), stream: true });
    let content = '';
    const failed = await (async () => {
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    })().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(Error);
    expect(content.length).toBeGreaterThan(0);
    expect(content).not.toBe('one two three four');
  });

  /** A long streamed answer aborted by the openai SDK after a few words; when the fake provider saw the abort, and the run. */
  async function abortMidStream(headers: Record<string, string>) {
    const t = target();
    t.fake.script({ text: Array.from({ length: 50 }, (_, i) => `w${i} `), chunkDelayMs: 100 });
    const controller = new AbortController();
    const index = t.fake.requests.length;
    const stream = await client().chat.completions.create({ model: t.agentId, messages: user('long'), stream: true }, { signal: controller.signal, headers });
    let id = '';
    const reading = (async () => {
      for await (const chunk of stream) {
        id = chunk.id;
        if ((chunk.choices[0]?.delta.content ?? '').startsWith('w2')) controller.abort();
      }
    })().catch(() => undefined);
    await reading;
    const abortedAt = Date.now();
    const seen = await t.fake.waitForAbort({ index, timeoutMs: 5000 });
    await waitFor(async () => (await t.runStatus(runIdOf(id))) === 'cancelled', 5000);
    return { afterMs: seen.abortedAt! - abortedAt };
  }

  // The targets' reliability.resume_grace_ms (e2e/targets.ts) is 500.
  it('cancels the run of a plain client that aborts at once, without waiting for a resume: OpenAI ends a stream whose connection closed', async () => {
    const { afterMs } = await abortMidStream({});
    expect(afterMs).toBeLessThan(500);
  });

  it('keeps the run of a client that asked to resume (X-Agentry-Resumable) for the resume grace, then cancels it', async () => {
    const { afterMs } = await abortMidStream({ 'x-agentry-resumable': 'true' });
    expect(afterMs).toBeGreaterThanOrEqual(400);
  });

  it('frames SSE exactly: headers, data lines, [DONE]', async () => {
    const t = target();
    t.fake.script({ text: ['He', 'llo'] });
    const res = await fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ model: t.agentId, messages: user('x'), stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('content-encoding')).toBeNull();
    const text = await res.text();
    const events = parseSse(text);
    expect(events.at(-1)!.data).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => {
      const parsed = JSON.parse(e.data) as { id: string; choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }> };
      assertValid('CreateChatCompletionStreamResponse', parsed);
      return parsed;
    });
    // Every run event's last chunk carries its id, `<runId>:<seq>`, seq rising: what a client
    // resumes from. The role chunk and the finish chunk belong to the event after them.
    const runId = runIdOf(chunks[0]!.id);
    expect(events.map((e) => e.id?.replace(/\d+$/, 'N'))).toEqual([undefined, `${runId}:N`, `${runId}:N`, undefined, `${runId}:N`]);
    const seqs = events.filter((e) => e.id).map((e) => Number(e.id!.split(':')[1]));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(chunks.map((c) => c.choices[0]!.delta)).toEqual([{ role: 'assistant', content: '' }, { content: 'He' }, { content: 'llo' }, { content: '' }]);
    expect(chunks.map((c) => c.choices[0]!.finish_reason)).toEqual([null, null, null, 'stop']);
    expect(text).not.toMatch(/tool_calls/);
  });

  it('resumes a dropped stream with Last-Event-ID, the same request or GET /runs/{id}/events: every delta once, in order', async () => {
    const t = target();
    const words = Array.from({ length: 30 }, (_, i) => `r${i} `);
    t.fake.script({ text: words, chunkDelayMs: 40 });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}`, 'x-agentry-resumable': 'true' };
    const body = JSON.stringify({ model: t.agentId, messages: user('resume me'), stream: true });
    const first = new AbortController();
    const res = await fetch(`${t.baseURL}/chat/completions`, { method: 'POST', headers, body, signal: first.signal });
    const before = await readUntil(res, (events) => contentOf(events).split(' ').length > 5 && events.at(-1)?.id !== undefined, first).catch(() => []);
    const lastId = before.filter((e) => e.id).at(-1)!.id!;
    const runId = lastId.split(':')[0]!;
    // The same request again, with the last id it got: the rest, then [DONE].
    const resumed = await fetch(`${t.baseURL}/chat/completions`, { method: 'POST', headers: { ...headers, 'last-event-id': lastId }, body });
    expect(resumed.status).toBe(200);
    const after = parseSse(await resumed.text());
    expect(after.at(-1)!.data).toBe('[DONE]');
    // No role chunk again: the client had it.
    expect(after.some((e) => e.data.includes('"role"'))).toBe(false);
    expect(contentOf(before) + contentOf(after)).toBe(words.join(''));
    await waitFor(async () => (await t.runStatus(runId)) === 'succeeded', 5000);
    // A finished run replays whole from its kept events, and from a point as well.
    const replay = await fetch(`${t.baseURL}/runs/${runId}/events`, { headers });
    const replayText = await replay.text();
    expect(replay.status, replayText).toBe(200);
    const all = parseSse(replayText);
    expect(contentOf(all), replayText).toBe(words.join(''));
    expect(contentOf(all)).toBe(words.join(''));
    expect(all[0]!.data).toContain('"role":"assistant"');
    expect(all.at(-1)!.data).toBe('[DONE]');
    const tail = parseSse(await (await fetch(`${t.baseURL}/runs/${runId}/events`, { headers: { ...headers, 'last-event-id': lastId } })).text());
    expect(contentOf(tail)).toBe(contentOf(after));
    // Only its own client may resume it; a malformed id is refused, not taken for a new request.
    expect((await fetch(`${t.baseURL}/runs/${runId}/events`)).status).toBe(401);
    expect((await fetch(`${t.baseURL}/runs/${'0'.repeat(32)}/events`, { headers })).status).toBe(404);
    const bad = await fetch(`${t.baseURL}/chat/completions`, { method: 'POST', headers: { ...headers, 'last-event-id': 'nope' }, body });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/Last-Event-ID/);
  });

  it('lists agents as models, and retrieves one', async () => {
    const t = target();
    const page = await client().models.list();
    expect(page.data.map((m) => m.id)).toContain(t.agentId);
    const auth = { authorization: `Bearer ${t.apiKey}` };
    assertValid('ListModelsResponse', await (await fetch(`${t.baseURL}/models`, { headers: auth })).json());
    const model = await client().models.retrieve(t.agentId);
    expect(model).toMatchObject({ id: t.agentId, object: 'model', owned_by: 'agentry' });
    expect(model.created).toBe(page.data.find((m) => m.id === t.agentId)!.created);
    assertValid('Model', await (await fetch(`${t.baseURL}/models/${t.agentId}`, { headers: auth })).json());
    const missing = await client()
      .models.retrieve('no-such-agent')
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(APIError);
    expect((missing as APIError).status).toBe(404);
  });

  it("answers an unknown model with 404 and bad input with 400, as OpenAI's error object", async () => {
    const t = target();
    const notFound = await client()
      .chat.completions.create({ model: 'no-such-agent', messages: user('x') })
      .catch((e: unknown) => e);
    expect((notFound as APIError).status).toBe(404);
    const post = (body: unknown) =>
      fetch(`${t.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
        body: JSON.stringify(body),
      });
    for (const body of [
      { model: t.agentId, messages: [] },
      { model: t.agentId, messages: [{ role: 'wizard', content: 'x' }] },
      { model: t.agentId, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }] },
      { model: t.agentId, messages: [{ role: 'user', content: 42 }] },
    ]) {
      const res = await post(body);
      expect(res.status).toBe(400);
      const error = await res.json();
      assertValid('ErrorResponse', error);
      expect(error).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringMatching(/^Invalid input: /) } });
    }
    expect((notFound as APIError).type).toBe('invalid_request_error');
    expect((notFound as APIError).message).toMatch(/^404 Not found: agent "no-such-agent"/);
    const noKey = await fetch(`${t.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noKey.status).toBe(401);
    assertValid('ErrorResponse', await noKey.json());
  });

  it('accepts text content parts, joined', async () => {
    const t = target();
    t.fake.script({ text: 'ok' });
    await client().chat.completions.create({
      model: t.agentId,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'part one' }, { type: 'text', text: 'part two' }] }],
    });
    expect(t.fake.requests.at(-1)!.body.messages.at(-1)).toEqual({ role: 'user', content: 'part one\npart two' });
  });

  it('passes temperature, max_tokens and stop through, and adds request system messages to the instructions', async () => {
    const t = target();
    t.fake.script({ text: 'ok' });
    await client().chat.completions.create({
      model: t.agentId,
      messages: [
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: 'q' },
      ],
      temperature: 0.2,
      max_tokens: 33,
      stop: ['END'],
    });
    const body = t.fake.requests.at(-1)!.body as unknown as Record<string, unknown> & { messages: unknown[] };
    expect(body).toMatchObject({ temperature: 0.2, max_tokens: 33, stop: ['END'] });
    expect(body.messages[0]).toEqual({ role: 'system', content: `${SYSTEM_PROMPT}\n\nAnswer briefly.` });
  });

  it("passes response_format to the agent's model call", async () => {
    const t = target();
    const formats = [
      { type: 'json_object' as const },
      { type: 'json_schema' as const, json_schema: { name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, strict: true } },
    ];
    for (const response_format of formats) {
      t.fake.script({ text: '{"a":"b"}' });
      const res = await client().chat.completions.create({ model: t.agentId, messages: user('json please'), response_format });
      expect(res.choices[0]!.message.content).toBe('{"a":"b"}');
      expect((t.fake.requests.at(-1)!.body as unknown as Record<string, unknown>).response_format).toEqual(response_format);
    }
  });

  it('refuses with 400 what it cannot honour: n > 1, a tool choice without tools', async () => {
    const t = target();
    const refused = async (extra: Record<string, unknown>) => {
      const err = await client()
        .chat.completions.create({ model: t.agentId, messages: user('x'), ...extra } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(err, JSON.stringify(extra)).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(400);
      return (err as APIError).message;
    };
    expect(await refused({ n: 2 })).toMatch(/\bn\b/);
    // The client's own tools are taken (e2e/client-tools.ts); asking to call one without any is not.
    expect(await refused({ tool_choice: 'required' })).toMatch(/tool_choice: the request gives no tools to choose from/);
  });
}

/**
 * Skills reach the system prompt of the very next run after a change through the API, though the
 * workers keep each agent's skills in memory (the gateway announces every change).
 */
export function skillsConformance(target: () => ChatTarget): void {
  const client = () => new OpenAI({ baseURL: target().baseURL, apiKey: target().apiKey, maxRetries: 0, timeout: 20_000 });
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${target().baseURL}${path}`, body === undefined ? { method } : { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  /** The system prompt the provider saw for a fresh run. */
  const systemPrompt = async () => {
    const t = target();
    t.fake.script({ text: 'ok' });
    await client().chat.completions.create({ model: t.agentId, messages: [{ role: 'user', content: 'which skills?' }] });
    return (t.fake.requests.at(-1)!.body.messages[0] as { content: string }).content;
  };

  it("puts a skill created, changed or deleted through the API into the next run's system prompt", async () => {
    const agent = target().agentId;
    // Twice, so every worker of a cluster has read (and keeps) the agent's skills.
    expect(await systemPrompt()).toBe(SYSTEM_PROMPT);
    expect(await systemPrompt()).toBe(SYSTEM_PROMPT);
    try {
      expect((await api('POST', '/skills', { name: 'conf_global', description: 'Global help.', content: '# global' })).status).toBe(201);
      expect(await systemPrompt()).toContain('- conf_global: Global help.');
      expect((await api('POST', `/agents/${agent}/skills`, { name: 'conf_local', description: 'Local help.', content: '# local' })).status).toBe(201);
      expect(await systemPrompt()).toContain('- conf_local: Local help.');
      expect((await api('PUT', `/agents/${agent}/skills/conf_local`, { description: 'Changed help.' })).status).toBe(200);
      const changed = await systemPrompt();
      expect(changed).toContain('- conf_local: Changed help.');
      expect(changed).not.toContain('Local help.');
      expect((await api('DELETE', '/skills/conf_global')).status).toBe(200);
      expect((await api('DELETE', `/agents/${agent}/skills/conf_local`)).status).toBe(200);
      expect(await systemPrompt()).toBe(SYSTEM_PROMPT);
    } finally {
      await api('DELETE', '/skills/conf_global');
      await api('DELETE', `/agents/${agent}/skills/conf_local`);
    }
  });
}

/** Session behaviour through the chat endpoint. */
export function sessionConformance(target: () => ChatTarget): void {
  const client = () => new OpenAI({ baseURL: target().baseURL, apiKey: target().apiKey, maxRetries: 0, timeout: 20_000 });
  type Body = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming & { sessionId?: string };
  const ask = (content: string, sessionId?: string) =>
    client().chat.completions.create({ model: target().agentId, messages: [{ role: 'user', content }], ...(sessionId ? { sessionId } : {}) } as Body);

  it('keeps context with a sessionId and not without', async () => {
    const t = target();
    const sid = `s-${Date.now()}`;
    t.fake.script({ text: 'first answer' }, { text: 'second answer' }, { text: 'stateless' });
    await ask('first question', sid);
    await ask('second question', sid);
    expect(t.fake.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ]);
    await ask('no session');
    expect(t.fake.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'no session' },
    ]);

    // The stored conversation, as the UI and the CLI read it.
    const list = (await (await fetch(`${t.baseURL}/sessions?agentId=${t.agentId}&size=100`)).json()) as {
      data: Array<{ id: string; sessionKey: string; channel: string; messageCount: number; title: string }>;
      page: number;
      size: number;
    };
    expect(list).toMatchObject({ page: 1, size: 100 });
    const stored = list.data.find((x) => x.sessionKey === sid)!;
    expect(stored).toMatchObject({ channel: 'api', messageCount: 4, title: 'first question' });
    const messages = (await (await fetch(`${t.baseURL}/sessions/${stored.id}/messages`)).json()) as Array<{ role: string; content: string }>;
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'first question'],
      ['assistant', 'first answer'],
      ['user', 'second question'],
      ['assistant', 'second answer'],
    ]);
    expect((await fetch(`${t.baseURL}/sessions/no-such-session/messages`)).status).toBe(404);
    expect((await fetch(`${t.baseURL}/sessions?size=0`)).status).toBe(400);
  });

  it('runs concurrent turns of one session one after the other, in arrival order', async () => {
    const t = target();
    const sid = `c-${Date.now()}`;
    t.fake.script({ text: 'A', delayMs: 300 }, { text: 'B' });
    const first = ask('one', sid);
    await new Promise((r) => setTimeout(r, 100));
    const second = ask('two', sid);
    await Promise.all([first, second]);
    const [r1, r2] = t.fake.requests.slice(-2);
    expect(r1!.body.messages.at(-1)).toEqual({ role: 'user', content: 'one' });
    // The second turn started after the first completed: it sees the first answer.
    expect(r2!.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'A' },
      { role: 'user', content: 'two' },
    ]);
    expect(r2!.receivedAt).toBeGreaterThanOrEqual(r1!.receivedAt + 250);
  });

  it('clears a session', async () => {
    const t = target();
    const sid = `x-${Date.now()}`;
    t.fake.script({ text: 'remember me' }, { text: 'fresh' });
    await ask('hello', sid);
    const res = await fetch(`${t.baseURL}/sessions/clear`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ agentId: t.agentId, sessionKey: sid }),
    });
    expect(await res.json()).toEqual({ success: true, message: 'cleared 1 session' });
    await ask('again', sid);
    expect(t.fake.requests.at(-1)!.body.messages).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'again' },
    ]);
  });

  it('leaves the history unchanged when a run is cancelled or fails', async () => {
    const t = target();
    const sid = `k-${Date.now()}`;
    t.fake.script({ text: 'kept' });
    await ask('keep this', sid);
    t.fake.script({ text: Array.from({ length: 40 }, () => 'z '), chunkDelayMs: 100 });
    const controller = new AbortController();
    // Counted before the request: the stream opens with its first token, once the provider was called.
    const before = t.fake.requests.length;
    const stream = await client().chat.completions.create(
      { model: t.agentId, messages: [{ role: 'user', content: 'cancel this' }], stream: true, sessionId: sid } as OpenAI.Chat.ChatCompletionCreateParamsStreaming,
      { signal: controller.signal },
    );
    await (async () => {
      // Abort once the provider is streaming.
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) controller.abort();
    })().catch(() => undefined);
    await t.fake.waitForAbort({ index: before, timeoutMs: 3000 });
    const fail = { status: 400, body: { error: { message: 'bad' } } };
    t.fake.script(fail);
    await ask('fail this', sid).catch(() => undefined);
    t.fake.script({ text: 'after' });
    await ask('last', sid);
    expect(t.fake.requests.at(-1)!.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'keep this' },
      { role: 'assistant', content: 'kept' },
      { role: 'user', content: 'last' },
    ]);
  });
}

/**
 * `server.request_timeout_ms` (issue 20, finding 6) bounds how long a request takes to arrive,
 * not how long its answer streams. The target runs with a 1 s request timeout.
 */
export function requestTimeoutConformance(target: () => ChatTarget): void {
  it('a chat stream longer than server.request_timeout_ms is not cut', async () => {
    const t = target();
    t.fake.reset();
    const words = Array.from({ length: 12 }, (_, i) => `w${i} `);
    t.fake.script({ text: words, chunkDelayMs: 250 });
    const res = await fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ model: t.agentId, messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(contentOf(parseSse(text))).toBe(words.join(''));
    t.fake.reset();
  });
}

/**
 * Issue 20, finding 5: a stream whose agent was deleted mid-run never ended (the run row went
 * with the agent, so the relay found nothing to end with and pinged for ever). The target's
 * `reliability.relay_check_ms` bounds how long the stream may go on after the delete.
 */
export function agentDeletionConformance(target: () => ChatTarget): void {
  /** An agent of this test alone (it is deleted), with the fake's queue emptied. */
  const newAgent = async (t: ChatTarget) => {
    const agentId = `doomed-${Math.random().toString(36).slice(2, 8)}`;
    const created = await fetch(`${t.baseURL}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl(agentId)) });
    expect(created.status).toBe(201);
    t.fake.reset();
    return agentId;
  };
  it('deleting an agent mid-stream cancels its run and ends the stream with an error event', async () => {
    const t = target();
    const agentId = await newAgent(t);
    // The role chunk, then 'first ', then silence.
    t.fake.script({ text: ['first ', 'never'], hangAfterChunks: 2 });
    const index = t.fake.requests.length;
    const res = await fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ model: agentId, messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('first ')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before the first token: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    expect((await fetch(`${t.baseURL}/agents/${agentId}`, { method: 'DELETE' })).status).toBe(200);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const events = text.split('\n\n').map((e) => e.replace(/^id: [^\n]*\n/, '')).filter((e) => e.startsWith('data: '));
    expect(events.at(-1)).not.toBe('data: [DONE]');
    expect(JSON.parse(events.at(-1)!.slice(6))).toEqual({
      error: { message: expect.stringMatching(/run was deleted while it ran/), type: expect.any(String), code: 404 },
    });
    // The worker was told: the model call was cancelled rather than left to run for nobody.
    await t.fake.waitForAbort({ index, timeoutMs: 10_000 });
    t.fake.reset();
  });

  it('deleting an agent during a non-stream request answers it 404 {error}', async () => {
    const t = target();
    const agentId = await newAgent(t);
    t.fake.script({ hang: true });
    const index = t.fake.requests.length;
    const answer = fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ model: agentId, messages: [{ role: 'user', content: 'x' }] }),
    });
    await t.fake.waitForRequest(index + 1, 10_000);
    expect((await fetch(`${t.baseURL}/agents/${agentId}`, { method: 'DELETE' })).status).toBe(200);
    const res = await answer;
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { message: expect.stringMatching(/run was deleted while it ran/), type: 'invalid_request_error' } });
    await t.fake.waitForAbort({ index, timeoutMs: 10_000 });
    t.fake.reset();
  });
}
