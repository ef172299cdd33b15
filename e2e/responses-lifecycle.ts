import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import OpenAI, { type APIError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { expect, it } from 'vitest';
import { waitFor } from '@agentry/testing';
import type { ResponsesTarget } from './responses-conformance.js';
import { assertValid } from './openai-schema.js';
import { openaiErrorMessage } from './openai-error.js';

/**
 * A client process: the openai SDK starting a background stream and printing each event as a
 * JSON line, until it is killed.
 */
const CLIENT_SCRIPT = `
import OpenAI from 'openai';
const [baseURL, apiKey, model] = process.argv.slice(1);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const stream = await client.responses.create({ model, input: 'count', background: true, stream: true });
for await (const event of stream) console.log(JSON.stringify(event));
`;

/** The run id in a response id (`resp_<runId>`). */
const runIdOf = (responseId: string) => responseId.replace(/^resp_/, '');

/**
 * A stored response's lifecycle with the official SDK: `responses.retrieve` (plain and
 * streamed from `starting_after`), `cancel`, `delete`, `inputItems.list`, and `background: true`
 * responses that live without their client. Bodies and events checked against OpenAI's schemas.
 */
export function responsesLifecycleConformance(target: () => ResponsesTarget): void {
  const client = (apiKey = target().apiKey) => new OpenAI({ baseURL: target().baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
  const call = (method: string, path: string, body?: unknown, apiKey = target().apiKey) =>
    fetch(`${target().baseURL}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const statusOf = async (p: Promise<unknown>) => ((await p.catch((e: unknown) => e)) as APIError).status;

  it('retrieve gives the stored Response; another caller and unknown ids get a 404 in OpenAI error shape', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'stored answer', usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
    const created = await client().responses.create({ model: t.agentId, input: 'keep this', instructions: 'Be kind.', metadata: { k: 'v' }, temperature: 0.5 });
    // Into the next second: retrieve must tell the completed_at the answer told, not the time it is asked.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
    const got = await client().responses.retrieve(created.id);
    assertValid('Response', got);
    expect(got).toMatchObject({
      id: created.id,
      object: 'response',
      status: 'completed',
      background: false,
      model: t.agentId,
      instructions: 'Be kind.',
      metadata: { k: 'v' },
      temperature: 0.5,
      store: true,
      error: null,
    });
    expect(got.output_text).toBe('stored answer');
    expect(got.output).toEqual(created.output);
    expect(got.usage).toMatchObject({ input_tokens: 5, output_tokens: 2, total_tokens: 7 });
    expect(got.created_at).toBe(created.created_at);
    expect(got.completed_at).toBe(created.completed_at);

    expect(await statusOf(client(t.otherApiKey).responses.retrieve(created.id))).toBe(404);
    for (const id of [created.id, 'resp_nope']) {
      const res = await call('GET', `/responses/${id}`, undefined, id === 'resp_nope' ? t.apiKey : t.otherApiKey);
      expect(res.status).toBe(404);
      const body = await res.json();
      assertValid('ErrorResponse', body);
      expect(openaiErrorMessage(body)).toMatch(new RegExp(id));
    }
    // A store: false response is kept nowhere to be fetched.
    t.fake.script({ text: 'unkept' });
    const unkept = await client().responses.create({ model: t.agentId, input: 'x', store: false });
    expect(await statusOf(client().responses.retrieve(unkept.id))).toBe(404);
  });

  it('inputItems.list lists the input items newest first, pages with after/limit, and in order with order=asc', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'listed' });
    const created = await client().responses.create({
      model: t.agentId,
      instructions: 'not an item',
      input: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: 'first' },
        { role: 'assistant', content: [{ type: 'output_text', text: 'an answer' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second' }] },
      ],
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    const texts = (items: Array<{ role?: string; content?: unknown }>) =>
      items.map((item) => `${item.role}:${(item.content as Array<{ text: string }>).map((c) => c.text).join('')}`);

    const all = [];
    for await (const item of client().responses.inputItems.list(created.id, { limit: 3 })) all.push(item);
    expect(texts(all as never)).toEqual(['user:second', 'assistant:an answer', 'user:first', 'developer:be brief']);
    expect(new Set(all.map((i) => i.id)).size).toBe(4);

    const page = await call('GET', `/responses/${created.id}/input_items?order=asc&limit=2`);
    expect(page.status).toBe(200);
    const body = (await page.json()) as { data: Array<{ id: string; role: string; content: unknown }>; first_id: string; last_id: string; has_more: boolean };
    assertValid('ResponseItemList', body);
    expect(texts(body.data)).toEqual(['developer:be brief', 'user:first']);
    expect(body).toMatchObject({ object: 'list', first_id: body.data[0]!.id, last_id: body.data[1]!.id, has_more: true });
    const next = (await (await call('GET', `/responses/${created.id}/input_items?order=asc&limit=2&after=${body.last_id}`)).json()) as typeof body;
    assertValid('ResponseItemList', next);
    expect(texts(next.data)).toEqual(['assistant:an answer', 'user:second']);
    expect(next.has_more).toBe(false);

    const bad = await call('GET', `/responses/${created.id}/input_items?order=sideways`);
    expect(bad.status).toBe(400);
    openaiErrorMessage(await bad.json());
    expect(await statusOf(client(t.otherApiKey).responses.inputItems.list(created.id))).toBe(404);
  });

  it('delete answers {id, object, deleted}; the response is then gone for retrieve and previous_response_id', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: 'one' }, { text: 'two' });
    const first = await client().responses.create({ model: t.agentId, input: 'one' });
    const second = await client().responses.create({ model: t.agentId, input: 'two' });
    // Not another caller's to delete.
    expect(await statusOf(client(t.otherApiKey).responses.delete(first.id))).toBe(404);
    await client().responses.delete(first.id);
    expect(await statusOf(client().responses.retrieve(first.id))).toBe(404);
    expect(await statusOf(client().responses.create({ model: t.agentId, input: 'more', previous_response_id: first.id }))).toBe(404);
    expect(await statusOf(client().responses.delete(first.id))).toBe(404);

    const raw = await call('DELETE', `/responses/${second.id}`);
    expect(raw.status).toBe(200);
    expect(await raw.json()).toEqual({ id: second.id, object: 'response', deleted: true });
  });

  it('background: true answers at once as queued, the run completes without its client, retrieve shows it completed', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['in ', 'the ', 'background'], chunkDelayMs: 50, usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } });
    const created = await client().responses.create({ model: t.agentId, input: 'work alone', background: true });
    assertValid('Response', created);
    expect(['queued', 'in_progress']).toContain(created.status);
    expect(created.background).toBe(true);
    expect(created.output).toEqual([]);
    let got = await client().responses.retrieve(created.id);
    await waitFor(async () => {
      got = await client().responses.retrieve(created.id);
      return got.status === 'completed';
    }, 10_000);
    assertValid('Response', got);
    expect(got.output_text).toBe('in the background');
    expect(got.background).toBe(true);
    expect(got.usage).toMatchObject({ input_tokens: 3, output_tokens: 3, total_tokens: 6 });
    expect(await t.runStatus(runIdOf(created.id))).toBe('succeeded');

    // OpenAI's rule: a background response must be stored.
    const res = await call('POST', '/responses', { model: t.agentId, input: 'x', background: true, store: false });
    expect(res.status).toBe(400);
    expect(openaiErrorMessage(await res.json())).toMatch(/background/);
  });

  it('cancel stops a background response (provider call aborted) and answers it cancelled; a plain one cannot be cancelled', async () => {
    const t = target();
    t.fake.reset();
    t.fake.script({ text: ['started ', 'and never ends'], hangAfterChunks: 1 });
    const created = await client().responses.create({ model: t.agentId, input: 'hang', background: true });
    await t.fake.waitForRequest(1);
    const cancelled = await client().responses.cancel(created.id);
    assertValid('Response', cancelled);
    expect(cancelled).toMatchObject({ id: created.id, status: 'cancelled', background: true });
    const aborted = await t.fake.waitForAbort({ index: 0 });
    expect(aborted.aborted).toBe(true);
    expect(await t.runStatus(runIdOf(created.id))).toBe('cancelled');
    expect((await client().responses.retrieve(created.id)).status).toBe('cancelled');
    // Cancelling again answers it as it stands.
    expect((await client().responses.cancel(created.id)).status).toBe('cancelled');

    t.fake.reset();
    t.fake.script({ text: 'plain' });
    const plain = await client().responses.create({ model: t.agentId, input: 'plain' });
    const res = await call('POST', `/responses/${plain.id}/cancel`);
    expect(res.status).toBe(400);
    const body = await res.json();
    assertValid('ErrorResponse', body);
    expect(openaiErrorMessage(body)).toMatch(/background/);
    expect(await statusOf(client(t.otherApiKey).responses.cancel(created.id))).toBe(404);
  });

  it('a background stream whose client aborts goes on; retrieve(stream, starting_after) gives the rest, numbered on', async () => {
    const t = target();
    t.fake.reset();
    const words = ['one ', 'two ', 'three ', 'four ', 'five ', 'six'];
    t.fake.script({ text: words, chunkDelayMs: 200 });
    const first = await client().responses.create({ model: t.agentId, input: 'count', background: true, stream: true });
    const seen: ResponseStreamEvent[] = [];
    for await (const event of first) {
      seen.push(event);
      if (seen.filter((e) => e.type === 'response.output_text.delta').length === 2) break;
    }
    // Breaking out of the loop aborts the SDK's request: the connection closes mid-answer.
    const id = (seen[0] as { response: { id: string; background: boolean } }).response.id;
    expect((seen[0] as { response: { background: boolean } }).response.background).toBe(true);
    // As OpenAI's: a background response is created queued, then runs.
    expect(seen[0]).toMatchObject({ type: 'response.created', response: { status: 'queued' } });
    expect(seen[1]).toMatchObject({ type: 'response.in_progress', response: { status: 'in_progress' } });
    const last = seen.at(-1)!.sequence_number;

    const rest: ResponseStreamEvent[] = [];
    const resumed = await client().responses.retrieve(id, { stream: true, starting_after: last });
    for await (const event of resumed) rest.push(event);
    for (const event of rest) assertValid('ResponseStreamEvent', event);
    expect(rest.map((e) => e.sequence_number)).toEqual(rest.map((_, i) => last + 1 + i));
    const deltas = [...seen, ...rest].flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(deltas.join('')).toBe(words.join(''));
    const completed = rest.at(-1)!;
    expect(completed.type).toBe('response.completed');
    expect(completed.type === 'response.completed' && completed.response.output[0]).toMatchObject({ content: [{ text: words.join('') }] });
    // The client's leaving cancelled nothing: the provider's answer went out whole.
    expect(t.fake.requests[0]).toMatchObject({ aborted: false, completed: true });
    expect(await t.runStatus(runIdOf(id))).toBe('succeeded');

    // The whole stream again, from its first event.
    const again: ResponseStreamEvent[] = [];
    for await (const event of await client().responses.retrieve(id, { stream: true })) again.push(event);
    expect(again.map((e) => e.sequence_number)).toEqual(again.map((_, i) => i));
    expect(again.at(-1)?.type).toBe('response.completed');
  });
  it('a background stream whose client process is killed goes on, and another process reads the rest', async () => {
    const t = target();
    t.fake.reset();
    const words = ['alpha ', 'beta ', 'gamma ', 'delta ', 'epsilon'];
    t.fake.script({ text: words, chunkDelayMs: 200 });
    // Run from the repository root, so that `import 'openai'` resolves as the suites' own.
    const child = spawn(process.execPath, ['--input-type=module', '-e', CLIENT_SCRIPT, t.baseURL, t.apiKey, t.agentId], { cwd: new URL('..', import.meta.url), stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const seen: ResponseStreamEvent[] = [];
    for await (const line of createInterface({ input: child.stdout })) {
      seen.push(JSON.parse(line) as ResponseStreamEvent);
      if (seen.filter((e) => e.type === 'response.output_text.delta').length === 2) {
        child.kill('SIGKILL');
        break;
      }
    }
    // Killed mid-answer, not ended on its own (a failing client would say why on stderr).
    expect(await exited, stderr).toBe('SIGKILL');
    const id = (seen[0] as { response: { id: string } }).response.id;
    const last = seen.at(-1)!.sequence_number;
    const rest: ResponseStreamEvent[] = [];
    for await (const event of await client().responses.retrieve(id, { stream: true, starting_after: last })) rest.push(event);
    expect(rest.map((e) => e.sequence_number)).toEqual(rest.map((_, i) => last + 1 + i));
    const deltas = [...seen, ...rest].flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    expect(deltas.join('')).toBe(words.join(''));
    expect(rest.at(-1)?.type).toBe('response.completed');
    expect(t.fake.requests[0]).toMatchObject({ aborted: false, completed: true });
    expect((await client().responses.retrieve(id)).status).toBe('completed');
  });
}
