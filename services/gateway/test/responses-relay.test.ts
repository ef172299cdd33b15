import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { QueueNames, type RunEvent } from '@agentry/contracts';
import { finishRun, getRun, insertRuleChain } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { runEventChannel } from '@agentry/runs';
import { ResponseEvents, responseObject, runIdOfResponse, type ResponseMeta } from '../src/chat/responses-events.js';

/**
 * `POST /responses` over the gateway's relay, with a scripted stand-in for the agent-worker: what
 * reaches the client for each kind of run event, and when the stream opens. The SDK and OpenAI's
 * schemas are checked in e2e/responses-*.test.ts.
 */
type Body = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'runId' | 'seq'> : never) : never;
const SCRIPTS: Record<string, Body[]> = {
  tools: [
    { type: 'tool_start', toolCallId: 'call_1', toolName: 'echo', toolType: 'builtin', arguments: '{"text":"hi"}' },
    { type: 'tool_result', toolCallId: 'call_1', toolName: 'echo', toolType: 'builtin', content: 'hi' },
    { type: 'text', text: 'The tool said hi.' },
    { type: 'done', finishReason: 'stop', usage: { promptTokens: 4, completionTokens: 5, totalTokens: 9 } },
  ],
  failing: [{ type: 'text', text: 'partial' }, { type: 'error', message: 'provider fake failed: 500', status: 502 }],
  early: [{ type: 'error', message: 'Upstream failure: provider fake answered 500', status: 502 }],
};

let runtime: Runtime;
let app: FastifyInstance;
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-responses-relay-'));

beforeAll(async () => {
  fs.writeFileSync(path.join(cwd, 'config.yaml'), 'reliability: {relay_check_ms: 200}\n');
  runtime = await bootstrap({
    service: 'responses-relay-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'responses-relay-master-key-0123456789' },
    cwd,
    logDestination: { write: () => {} },
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
      const [scenario, option] = (run!.request as { messages: Array<{ content: string }> }).messages.at(-1)!.content.split(':');
      let seq = 0;
      const publish = (e: Body) => runtime.bus.pubsub.publish(runEventChannel(run!), { ...e, runId, seq: seq++ } as RunEvent);
      // Longer than the keep-alive bound (heartbeatMs 50) before anything happens.
      if (scenario === 'slow' || scenario === 'slowfail') await new Promise((r) => setTimeout(r, 300));
      if (scenario === 'slowfail') return void (await publish({ type: 'error', message: 'too late to be a status', status: 502 }));
      if (scenario === 'lost') {
        await publish({ type: 'text', text: 'par' });
        await finishRun(runtime.db.db, runId, { status: 'succeeded', output: 'partial answer', usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 } });
        return;
      }
      if (scenario === 'lostfail') return void (await finishRun(runtime.db.db, runId, { status: 'failed', error: 'the provider broke' }));
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

const create = (input: string, stream = true) => app.inject({ method: 'POST', url: '/api/v1/responses', payload: { model: 'relay', input, stream } });

type Event = { type: string; sequence_number: number; delta?: string; response?: { status: string; error: unknown; output: unknown[]; usage?: unknown } };
const events = (body: string): Event[] =>
  body
    .split('\n\n')
    .filter((e) => /^data: /m.test(e))
    .map((block) => {
      // Each event is named on an `event:` line as OpenAI does; an `id:` line (what a client
      // resumes from) may follow.
      const name = /^event: (.*)$/m.exec(block)?.[1];
      const event = JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as Event;
      expect(name).toBe(event.type);
      return event;
    });

describe('POST /responses over the relay', () => {
  it('shows the answer, never the tool calls, in the stream and the body', async () => {
    const streamed = await create('tools');
    expect(streamed.statusCode).toBe(200);
    expect(streamed.headers['content-type']).toMatch(/text\/event-stream/);
    expect(streamed.body).not.toMatch(/call_1|tool_start|echo/);
    const list = events(streamed.body);
    expect(list.map((e) => e.delta ?? '').join('')).toBe('The tool said hi.');
    expect(list.at(-1)!.response).toMatchObject({ status: 'completed', usage: { input_tokens: 4, output_tokens: 5, total_tokens: 9 } });
    const plain = (await create('tools', false)).json();
    expect(plain.output[0].content[0].text).toBe('The tool said hi.');
    expect(runIdOfResponse(plain.id)).toMatch(/^[0-9a-f]{32}$/);
  });

  it('answers a failure before any output with its HTTP status, streamed or not', async () => {
    for (const stream of [true, false]) {
      const res = await create('early', stream);
      expect(res.statusCode).toBe(502);
      expect(res.json()).toEqual({ error: { message: expect.stringMatching(/provider fake answered 500/), type: 'server_error', param: null, code: 'run_failed' } });
    }
  });

  it('ends with response.failed, keeping the text sent, once output went out', async () => {
    const list = events((await create('failing')).body);
    expect(list.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed', error: { code: 'server_error', message: 'provider fake failed: 500' } } });
    expect(list.at(-1)!.response!.output).toMatchObject([{ status: 'incomplete', content: [{ text: 'partial' }] }]);
  });

  it('opens the stream at the keep-alive bound when the run is slow; a later failure is then response.failed', async () => {
    const slow = await create('slow:late text');
    expect(slow.statusCode).toBe(200);
    expect(events(slow.body).map((e) => e.type).slice(0, 3)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added']);
    expect(slow.body).toMatch(/: ping/);
    const failed = await create('slowfail');
    expect(failed.statusCode).toBe(200);
    const list = events(failed.body);
    expect(list.map((e) => e.type)).toEqual(['response.created', 'response.in_progress', 'response.failed']);
    expect(list.at(-1)!.response!.output).toEqual([]);
  });

  it('ends from the stored run when its last events were lost', async () => {
    const list = events((await create('lost')).body);
    expect(list.map((e) => e.delta ?? '').join('')).toBe('partial answer');
    expect(list.at(-1)!.response).toMatchObject({ status: 'completed', usage: { total_tokens: 5 } });
    expect((await create('lost', false)).json().output[0].content[0].text).toBe('partial answer');
    const failed = await create('lostfail', false);
    expect(failed.statusCode).toBe(502);
    expect(failed.json().error.message).toMatch(/the provider broke/);
  });
});

describe('Responses encoders', () => {
  const meta: ResponseMeta = {
    id: 'resp_1',
    itemId: 'msg_1',
    createdAt: 1700000000,
    model: 'agent',
    instructions: null,
    previousResponseId: null,
    store: true,
    temperature: null,
    topP: null,
    maxOutputTokens: null,
    toolChoice: 'auto',
    tools: [],
    parallelToolCalls: false,
    metadata: {},
    textFormat: { type: 'text' },
    background: false,
  };

  it('number events from 0 and give usage only to a completed response', () => {
    const ev = new ResponseEvents(meta);
    const created = ev.created();
    const list = [created, ev.inProgress(), ev.itemAdded(), ev.partAdded(), ev.textDelta('a'), ev.completed('a', null)];
    expect(list.map((e) => e.sequence_number)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(created.response).not.toHaveProperty('usage');
    expect(responseObject(meta, { status: 'completed', text: 'a', usage: undefined }).usage).toEqual({
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
    });
  });

  it("end with the calls of the client's tools as function_call items, after the message if there was text", () => {
    const call = { id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' };
    const only = responseObject(meta, { status: 'completed', text: '', usage: undefined, calls: [call] });
    expect(only.output).toEqual([{ type: 'function_call', id: 'fc_1_call_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}', status: 'completed' }]);
    const both = responseObject(meta, { status: 'completed', text: 'Checking.', usage: undefined, calls: [call] });
    expect(both.output.map((o) => o.type)).toEqual(['message', 'function_call']);
    const events = new ResponseEvents(meta).functionCall(call, 1);
    expect(events.map((e) => [e.type, e.output_index])).toEqual([
      ['response.output_item.added', 1],
      ['response.function_call_arguments.delta', 1],
      ['response.function_call_arguments.done', 1],
      ['response.output_item.done', 1],
    ]);
    expect(events[0]).toMatchObject({ item: { status: 'in_progress', arguments: '' } });
  });

  it('read a run id only from a response id of ours', () => {
    expect(runIdOfResponse(`resp_${'a'.repeat(32)}`)).toBe('a'.repeat(32));
    expect(runIdOfResponse('resp_nope')).toBeUndefined();
    expect(runIdOfResponse(`chatcmpl-${'a'.repeat(32)}`)).toBeUndefined();
  });
});
