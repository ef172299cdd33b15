import OpenAI, { APIError } from 'openai';
import { createParser } from 'eventsource-parser';
import { expect, it } from 'vitest';
import { SYSTEM_PROMPT, type ChatTarget } from './chat-conformance.js';
import { assertValid } from './openai-schema.js';

/** A chat target with a second caller, whose responses the first may not continue. */
export interface ResponsesTarget extends ChatTarget {
  /** Another `api`-platform account's key. */
  otherApiKey: string;
}

/** The second caller's key, configured by every target as another `api` account. */
export const OTHER_API_KEY = 'sk-conformance-other-account-0123456789';

/** The run id in a response id (`resp_<runId>`). */
const runIdOf = (responseId: string) => responseId.replace(/^resp_/, '');

const EVENT_ORDER = [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  'response.output_text.delta',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

/**
 * `POST /responses` with the official SDK (and raw fetch for the bytes), each body and event
 * checked against OpenAI's published schemas too. Registered inside the caller's describe.
 */
export function responsesConformance(target: () => ResponsesTarget): void {
  const client = (apiKey = target().apiKey) => new OpenAI({ baseURL: target().baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
  const post = (body: unknown, apiKey = target().apiKey) =>
    fetch(`${target().baseURL}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify(body),
    });
  const lastMessages = () => target().fake.requests.at(-1)!.body.messages;

  it('answers a non-stream request as a completed Response with the run usage', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'Hello there', usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } }, { text: 'raw' });
    const res = await client().responses.create({ model: t.agentId, input: 'hi' });
    expect(res.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(res).toMatchObject({ object: 'response', status: 'completed', model: t.agentId, error: null, store: true, previous_response_id: null });
    expect(Number.isInteger(res.created_at)).toBe(true);
    expect(res.output).toEqual([
      { type: 'message', id: expect.any(String), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello there', annotations: [], logprobs: [] }] },
    ]);
    expect(res.output_text).toBe('Hello there');
    expect(res.usage).toMatchObject({ input_tokens: 11, output_tokens: 2, total_tokens: 13 });
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'hi' },
    ]);
    expect(await t.runStatus(runIdOf(res.id))).toBe('succeeded');

    const raw = await post({ model: t.agentId, input: 'raw' });
    expect(raw.status).toBe(200);
    const body = (await raw.json()) as { output: Array<{ content: Array<{ text: string }> }> };
    assertValid('Response', body);
    expect(body.output[0]?.content[0]?.text).toBe('raw');
  });

  it('streams the Responses events in order, numbered, each valid against OpenAI schemas', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['Once ', 'upon ', 'a time'], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } });
    const stream = await client().responses.create({ model: t.agentId, input: 'story', stream: true });
    const events = [];
    for await (const event of stream) events.push(event);
    for (const event of events) assertValid('ResponseStreamEvent', event);
    const types = events.map((e) => e.type).filter((type, i, all) => type !== 'response.output_text.delta' || all[i - 1] !== type);
    expect(types).toEqual(EVENT_ORDER);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(deltas.join('')).toBe('Once upon a time');
    const done = events.find((e) => e.type === 'response.output_text.done');
    expect(done?.type === 'response.output_text.done' && done.text).toBe('Once upon a time');
    const completed = events.at(-1)!;
    if (completed.type !== 'response.completed') throw new Error(`last event ${completed.type}`);
    expect(completed.response.status).toBe('completed');
    expect(completed.response.usage).toMatchObject({ input_tokens: 7, output_tokens: 3, total_tokens: 10 });
    expect(completed.response.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: 'Once upon a time' }] });
    const created = events[0]!;
    expect(created.type === 'response.created' && created.response.id).toBe(completed.response.id);
  });

  it('names each streamed event on an event: line, as EventSource consumers listen for them', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['Named ', 'events'] });
    const res = await post({ model: t.agentId, input: 'names', stream: true });
    expect(res.status).toBe(200);
    // eventsource-parser is the WHATWG EventSource parsing that browser-side libraries use: an
    // event without an `event:` line would come out as the default 'message' type.
    const seen: Array<{ event: string | undefined; id: string | undefined; data: string }> = [];
    const parser = createParser({ onEvent: (e) => seen.push({ event: e.event, id: e.id, data: e.data }) });
    parser.feed(await res.text());
    expect(seen.length).toBeGreaterThan(5);
    for (const e of seen) {
      const data = JSON.parse(e.data) as { type: string };
      assertValid('ResponseStreamEvent', data);
      expect(e.event).toBe(data.type);
    }
    expect(seen.map((e) => e.event)).toContain('response.output_text.delta');
    expect(seen.at(-1)?.event).toBe('response.completed');
    // Events the client may resume after still carry their ids beside the name.
    expect(seen.filter((e) => e.event === 'response.output_text.delta').every((e) => e.id !== undefined)).toBe(true);
  });

  it('passes text.format json_schema and json_object to the model as chat response_format, and echoes it', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['{"a":"b"}'] });
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
    const format = { type: 'json_schema' as const, name: 'answer', schema, strict: true };
    const res = await client().responses.create({ model: t.agentId, input: 'json please', text: { format } });
    assertValid('Response', res);
    expect(res.output_text).toBe('{"a":"b"}');
    expect(res.text?.format).toEqual(format);
    expect(t.fake.requests.at(-1)!.body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } });

    t.fake.script({ text: ['{}'] });
    const stream = await client().responses.create({ model: t.agentId, input: 'any json', text: { format: { type: 'json_object' } }, stream: true });
    const events = [];
    for await (const event of stream) events.push(event);
    const completed = events.at(-1)!;
    if (completed.type !== 'response.completed') throw new Error(`last event ${completed.type}`);
    expect(completed.response.text?.format).toEqual({ type: 'json_object' });
    expect(t.fake.requests.at(-1)!.body.response_format).toEqual({ type: 'json_object' });

    t.fake.script({ text: ['plain'] });
    await client().responses.create({ model: t.agentId, input: 'plain', text: { format: { type: 'text' } } });
    expect(t.fake.requests.at(-1)!.body.response_format).toBeUndefined();
  });

  it('works with the SDK stream helper and finalResponse()', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['a', 'b', 'c'] });
    const stream = client().responses.stream({ model: t.agentId, input: 'abc' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(deltas.join('')).toBe('abc');
    expect(final.output_text).toBe('abc');
    expect(final.status).toBe('completed');
  });

  it('continues a conversation with previous_response_id, and passes instructions as system text for that turn only', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'first answer' }, { text: 'second answer' }, { text: 'third answer' });
    const first = await client().responses.create({ model: t.agentId, input: 'first question', instructions: 'Be terse.' });
    expect(lastMessages()).toEqual([
      { role: 'system', content: `${SYSTEM_PROMPT}\n\nBe terse.` },
      { role: 'user', content: 'first question' },
    ]);
    expect(first.instructions).toBe('Be terse.');
    const second = await client().responses.create({ model: t.agentId, input: 'second question', previous_response_id: first.id });
    expect(second.previous_response_id).toBe(first.id);
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ]);
    // Input items before the new question join the conversation too, as OpenAI appends them.
    await client().responses.create({
      model: t.agentId,
      previous_response_id: second.id,
      input: [
        { role: 'user', content: 'an aside' },
        { role: 'assistant', content: [{ type: 'output_text', text: 'noted' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'third question' }] },
      ],
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
      { role: 'assistant', content: 'second answer' },
      { role: 'user', content: 'an aside' },
      { role: 'assistant', content: 'noted' },
      { role: 'user', content: 'third question' },
    ]);
  });

  it('keeps nothing of a store: false turn: it cannot be continued, and the conversation it read is unchanged', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'kept answer' }, { text: 'unkept answer' }, { text: 'again' });
    const kept = await client().responses.create({ model: t.agentId, input: 'kept question' });
    const unkept = await client().responses.create({ model: t.agentId, input: 'unkept question', previous_response_id: kept.id, store: false });
    expect((unkept as unknown as { store: boolean }).store).toBe(false);
    // It read the conversation it continues.
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'kept question' },
      { role: 'assistant', content: 'kept answer' },
      { role: 'user', content: 'unkept question' },
    ]);
    const err = await client()
      .responses.create({ model: t.agentId, input: 'more', previous_response_id: unkept.id })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(404);
    await client().responses.create({ model: t.agentId, input: 'again', previous_response_id: kept.id });
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'kept question' },
      { role: 'assistant', content: 'kept answer' },
      { role: 'user', content: 'again' },
    ]);
  });

  it("refuses another caller's response id as not found", async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'mine' });
    const mine = await client().responses.create({ model: t.agentId, input: 'mine' });
    const err = await client(t.otherApiKey)
      .responses.create({ model: t.agentId, input: 'theirs', previous_response_id: mine.id })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(404);
    const unknown = await post({ model: t.agentId, input: 'x', previous_response_id: 'resp_nope' });
    expect(unknown.status).toBe(404);
    const body = await unknown.json();
    assertValid('ErrorResponse', body);
    expect(body).toMatchObject({ error: { message: expect.stringMatching(/resp_nope/), type: 'invalid_request_error', code: 'not_found', param: null } });
  });

  it('maps a provider failure before any output to 502, non-stream and stream alike', async () => {
    const t = target();
    const fail = { status: 500, body: { error: { message: 'upstream exploded' } } };
    t.fake.reset();
    t.fake.script(fail, fail, fail, fail, fail, fail);
    const err = await client()
      .responses.create({ model: t.agentId, input: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(502);
    t.fake.reset();
    t.fake.script(fail, fail, fail, fail, fail, fail);
    const streamed = await client()
      .responses.create({ model: t.agentId, input: 'x', stream: true })
      .catch((e: unknown) => e);
    expect(streamed).toBeInstanceOf(APIError);
    expect((streamed as APIError).status).toBe(502);
    t.fake.reset();
  });

  it('going on from an earlier response branches there: later turns are not part of the branch, and both branches go on', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'a1' }, { text: 'a2' }, { text: 'a3' }, { text: 'b3' }, { text: 'b4' }, { text: 'a4' }, { text: 'c3' });
    const r1 = await client().responses.create({ model: t.agentId, input: 'q1' });
    const r2 = await client().responses.create({ model: t.agentId, input: 'q2', previous_response_id: r1.id });
    const r3 = await client().responses.create({ model: t.agentId, input: 'q3', previous_response_id: r2.id });
    const turns = (...pairs: string[]) => pairs.map((content, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content }));
    const b3 = await client().responses.create({ model: t.agentId, input: 'branch q3', previous_response_id: r2.id });
    expect(lastMessages()).toEqual([{ role: 'system', content: SYSTEM_PROMPT }, ...turns('q1', 'a1', 'q2', 'a2', 'branch q3')]);
    await client().responses.create({ model: t.agentId, input: 'branch q4', previous_response_id: b3.id });
    expect(lastMessages()).toEqual([{ role: 'system', content: SYSTEM_PROMPT }, ...turns('q1', 'a1', 'q2', 'a2', 'branch q3', 'b3', 'branch q4')]);
    // The first line goes on as it was.
    await client().responses.create({ model: t.agentId, input: 'q4', previous_response_id: r3.id });
    expect(lastMessages()).toEqual([{ role: 'system', content: SYSTEM_PROMPT }, ...turns('q1', 'a1', 'q2', 'a2', 'q3', 'a3', 'q4')]);
    // A store: false turn from an earlier response reads the conversation up to it, too.
    await client().responses.create({ model: t.agentId, input: 'unkept q3', previous_response_id: r2.id, store: false });
    expect(lastMessages()).toEqual([{ role: 'system', content: SYSTEM_PROMPT }, ...turns('q1', 'a1', 'q2', 'a2', 'unkept q3')]);
    t.fake.reset();
  });

  it('a failed turn keeps none of its input items: the conversation continues as before it', async () => {
    const t = target();
    const fail = { status: 500, body: { error: { message: 'upstream exploded' } } };
    t.fake.reset();
    t.fake.script({ text: 'kept answer' }, fail, fail, fail, { text: 'after the failure' });
    const kept = await client().responses.create({ model: t.agentId, input: 'kept question' });
    const failed = await client()
      .responses.create({
        model: t.agentId,
        previous_response_id: kept.id,
        input: [
          { role: 'user', content: 'lost aside' },
          { role: 'assistant', content: 'lost reply' },
          { role: 'user', content: 'lost question' },
        ],
      })
      .catch((e: unknown) => e);
    expect((failed as APIError).status).toBe(502);
    await client().responses.create({ model: t.agentId, input: 'next question', previous_response_id: kept.id });
    expect(lastMessages()).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'kept question' },
      { role: 'assistant', content: 'kept answer' },
      { role: 'user', content: 'next question' },
    ]);
    t.fake.reset();
  });

  it('ends a stream that breaks after output with response.failed', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['one ', 'two ', 'three ', 'four'], failAfterChunks: 3 });
    const stream = await client().responses.create({ model: t.agentId, input: 'x', stream: true });
    const events = [];
    for await (const event of stream) events.push(event);
    for (const event of events) assertValid('ResponseStreamEvent', event);
    const last = events.at(-1)!;
    if (last.type !== 'response.failed') throw new Error(`last event ${last.type}`);
    expect(last.response.status).toBe('failed');
    expect(last.response.error).toEqual({ code: 'server_error', message: expect.any(String) });
    expect(events.some((e) => e.type === 'response.output_text.delta')).toBe(true);
    expect(events.some((e) => e.type === 'response.completed')).toBe(false);
    t.fake.reset();
  });

  it('refuses what it does not support, naming the field, and an unknown agent as chat does', async () => {
    const t = target();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ tools: [{ type: 'web_search' }] }, /: tools\[0\]: only function tools/],
      [{ tool_choice: 'required' }, /: tool_choice/],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }, /: input\[0\]\.content\[0\]/],
      [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }, /: input\[0\]\.content\[0\]/],
      [{ input: [{ type: 'function_call_output', output: 'x' }] }, /: input\[0\]\.call_id/],
      [{ text: { format: { type: 'yaml' } } }, /: text\.format/],
      [{ text: { format: { type: 'json_schema' } } }, /: text\.format/],
    ];
    for (const [extra, message] of cases) {
      const res = await post({ model: t.agentId, input: 'x', ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
    }
    const responses = await post({ model: 'no-such-agent', input: 'x' });
    const chat = await fetch(`${t.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` },
      body: JSON.stringify({ model: 'no-such-agent', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(responses.status).toBe(404);
    expect(await responses.json()).toEqual(await chat.json());
  });
}
