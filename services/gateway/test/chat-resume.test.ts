import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { QueueNames, RunKeeps, type RunEvent } from '@agentry/contracts';
import { finishRun, getRun, insertRuleChain, insertRun } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, waitFor } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { runEventChannel } from '@agentry/runs';

/**
 * Resuming a chat stream (issue 27 item 1) against the gateway alone: a stand-in worker keeps
 * and publishes events as the real one does, and runs are also made by hand to catch a resume
 * between the kept log and the live events. The cluster-wide proof (a gateway killed, the
 * resume on the other) is e2e/resume-cluster.test.ts; the clients' side is libs/client's.
 */
type Body = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'runId' | 'seq'> : never) : never;

let runtime: Runtime;
let app: FastifyInstance;
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-resume-'));
const keep = (runId: string) => ({ log: RunKeeps.events(runId), maxLen: 100, ttlMs: 60_000 });

/** Publishes a run's event the way the worker does: kept, then on the run's channel. */
async function emit(run: { id: string; replyTo: string | null }, seq: number, body: Body): Promise<void> {
  await runtime.bus.pubsub.publish(runEventChannel(run), { ...body, runId: run.id, seq } as RunEvent, keep(run.id));
}

beforeAll(async () => {
  fs.writeFileSync(path.join(cwd, 'config.yaml'), 'reliability: {relay_check_ms: 300, resume_grace_ms: 300}\n');
  runtime = await bootstrap({
    service: 'resume-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'resume-master-key-0123456789-abcdef' },
    cwd,
    logDestination: { write: () => {} },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await insertRuleChain(runtime.db.db, {
    id: 'resumer',
    kind: 'agent',
    agentId: null,
    name: 'Resumer',
    category: null,
    dsl: { ruleChain: { id: 'resumer', name: 'Resumer' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent' }], connections: [] } },
  });
  // "parts:N": N text events ("p0 " ... ), a tool call after the first, then done.
  runtime.bus.queue.consume(
    QueueNames.agentRun,
    async (job) => {
      // The queue carries forced compactions too: this stand-in runs runs only.
      if (job.data.type !== 'agent-run') throw new Error(`not a run: ${job.data.type}`);
      const { runId } = job.data;
      const run = (await getRun(runtime.db.db, runId))!;
      const n = Number((run.request as { messages: Array<{ content: string }> }).messages.at(-1)!.content.split(':')[1] ?? 3);
      let seq = 0;
      let text = '';
      for (let i = 0; i < n; i++) {
        await emit(run, seq++, { type: 'text', text: `p${i} ` });
        text += `p${i} `;
        if (i === 0) {
          await emit(run, seq++, { type: 'tool_start', toolCallId: 'c1', toolName: 'echo', toolType: 'builtin', arguments: '{}' });
          await emit(run, seq++, { type: 'tool_result', toolCallId: 'c1', toolName: 'echo', toolType: 'builtin', content: 'ok' });
        }
      }
      const finishedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
      await finishRun(runtime.db.db, run.id, { status: 'succeeded', output: text, finishedAt });
      await emit(run, seq++, { type: 'done', finishReason: 'stop', finishedAt: finishedAt.getTime() / 1000 });
    },
    { concurrency: 2 },
  );
  await seedGateway(runtime);
  app = await buildGateway(runtime, { heartbeatMs: 50 });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await runtime?.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

/** Each SSE event's id and data. */
function sse(body: string): Array<{ id?: string; data: string }> {
  return body
    .split('\n\n')
    .filter((b) => b.includes('data: '))
    .map((b) => {
      const id = /^id: (.*)$/m.exec(b)?.[1];
      const data = /^data: (.*)$/m.exec(b)![1]!;
      return id === undefined ? { data } : { id, data };
    });
}
const deltas = (events: Array<{ data: string }>) =>
  events.filter((e) => e.data !== '[DONE]').map((e) => (JSON.parse(e.data) as { choices: Array<{ delta: Record<string, unknown> }> }).choices[0]?.delta ?? {});
const text = (events: Array<{ data: string }>) => deltas(events).map((d) => (typeof d.content === 'string' ? d.content : '')).join('');

const chatBody = (content: string) => ({ model: 'resumer', messages: [{ role: 'user', content }], stream: true });

async function fullStream(content: string) {
  const res = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: chatBody(content), headers: { 'x-stream-protocol': 'agui' } });
  expect(res.statusCode).toBe(200);
  return sse(res.body);
}

describe('resuming a chat stream', () => {
  it('after any event id, the rest comes exactly once, by GET /runs/{id}/events or the same request again', async () => {
    const full = await fullStream('parts:4');
    const ids = full.filter((e) => e.id).map((e) => e.id!);
    const runId = ids[0]!.split(':')[0]!;
    expect(ids.map((id) => Number(id.split(':')[1]))).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(text(full)).toBe('p0 p1 p2 p3 ');
    for (let k = 0; k < ids.length; k++) {
      // What a client has up to and including the event with id k, and what a resume gives after it.
      const cut = full.findIndex((e) => e.id === ids[k]) + 1;
      // After the last event (the client had [DONE]) the answer still ends as a stream does.
      const rest = cut === full.length ? full.slice(-1) : full.slice(cut);
      const viaGet = sse((await app.inject({ method: 'GET', url: `/api/v1/runs/${runId}/events`, headers: { 'last-event-id': ids[k]!, 'x-stream-protocol': 'agui' } })).body);
      expect(viaGet, `after ${ids[k]}`).toEqual(rest);
      const viaQuery = sse((await app.inject({ method: 'GET', url: `/api/v1/runs/${runId}/events?after=${k}`, headers: { 'x-stream-protocol': 'agui' } })).body);
      expect(viaQuery).toEqual(rest);
    }
    const again = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: chatBody('parts:4'), headers: { 'last-event-id': ids[2]!, 'x-stream-protocol': 'agui' } });
    expect(sse(again.body)).toEqual(full.slice(full.findIndex((e) => e.id === ids[2]) + 1));
    // No new run was made for it.
    expect(await runtime.db.db.selectFrom('runs').select('id').where('agent_id', '=', 'resumer').execute()).toHaveLength(1);
    // From the start: the whole stream as it was sent, role chunk included.
    expect(sse((await app.inject({ method: 'GET', url: `/api/v1/runs/${runId}/events`, headers: { 'x-stream-protocol': 'agui' } })).body)).toEqual(full);
  });

  it('a Responses API stream resumes the same way, its sequence numbers going on from where the client stopped', async () => {
    const body = { model: 'resumer', input: 'parts:3', stream: true };
    const res = await app.inject({ method: 'POST', url: '/api/v1/responses', payload: body });
    expect(res.statusCode).toBe(200);
    const full = sse(res.body);
    const types = full.map((e) => (JSON.parse(e.data) as { type: string }).type);
    expect(types.at(0)).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    const ids = full.filter((e) => e.id).map((e) => e.id!);
    // The text deltas and the completion carry the run events' ids (the tool calls make no Responses event).
    expect(ids.map((id) => Number(id.split(':')[1]))).toEqual([0, 3, 4, 5]);
    // Into the next second: a resumed response.completed must tell the run's completed_at, not the time of the resume.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
    for (const id of ids.slice(0, -1)) {
      const again = await app.inject({ method: 'POST', url: '/api/v1/responses', payload: body, headers: { 'last-event-id': id } });
      expect(sse(again.body), `after ${id}`).toEqual(full.slice(full.findIndex((e) => e.id === id) + 1));
    }
    const runId = ids[0]!.split(':')[0]!;
    expect((await getRun(runtime.db.db, runId))!.status).toBe('succeeded');
  });

  it('a resume that starts between the kept events and the live ones misses none and repeats none', async () => {
    const run = { id: randomUUID().replace(/-/g, ''), replyTo: null };
    await insertRun(runtime.db.db, { id: run.id, agentId: 'resumer', sessionId: null, source: 'api', request: { messages: [] }, principal: '' });
    await emit(run, 0, { type: 'text', text: 'kept ' });
    await emit(run, 1, { type: 'text', text: 'before ' });
    const resumed = app.inject({ method: 'GET', url: `/api/v1/runs/${run.id}/events?after=0` });
    // The resume is listening once the run's channel has a subscriber.
    await waitFor(async () => ((await runtime.bus.pubsub.listeners([runEventChannel(run)]))[0] ?? 0) > 0, 5_000, 5);
    await emit(run, 2, { type: 'text', text: 'live ' });
    await emit(run, 3, { type: 'text', text: 'end' });
    await finishRun(runtime.db.db, run.id, { status: 'succeeded', output: 'kept before live end' });
    await emit(run, 4, { type: 'done', finishReason: 'stop' });
    const events = sse((await resumed).body);
    expect(text(events)).toBe('before live end');
    expect(events.at(-1)).toEqual({ id: `${run.id}:4`, data: '[DONE]' });
  });

  it('a finished run whose events are gone: its stored answer when the client had nothing, 410 when it had some', async () => {
    const id = randomUUID().replace(/-/g, '');
    await insertRun(runtime.db.db, { id, agentId: 'resumer', sessionId: null, source: 'api', request: { messages: [] }, principal: '' });
    await finishRun(runtime.db.db, id, { status: 'succeeded', output: 'stored answer' });
    const whole = await app.inject({ method: 'GET', url: `/api/v1/runs/${id}/events` });
    expect(whole.statusCode).toBe(200);
    const events = sse(whole.body);
    expect(deltas(events)[0]).toEqual({ role: 'assistant', content: '' });
    expect(text(events)).toBe('stored answer');
    expect(events.at(-1)!.data).toBe('[DONE]');
    const gone = await app.inject({ method: 'GET', url: `/api/v1/runs/${id}/events?after=3` });
    expect(gone.statusCode).toBe(410);
    expect(gone.json<{ error: string }>().error).toMatch(/no longer kept/);
  });

  it('POST /runs/{id}/cancel stops the caller’s own run at once (no grace), and answers how an ended one ended', async () => {
    const id = randomUUID().replace(/-/g, '');
    await insertRun(runtime.db.db, { id, agentId: 'resumer', sessionId: null, source: 'api', request: { messages: [] }, principal: '' });
    const heard: string[] = [];
    const off = await runtime.bus.pubsub.subscribe('run-cancel', (m) => heard.push(m.runId));
    const res = await app.inject({ method: 'POST', url: `/api/v1/runs/${id}/cancel` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ runId: id, status: 'cancelled' });
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'cancelled', error: 'cancelled by its client' });
    await waitFor(async () => heard.includes(id), 2_000, 10);
    await off();
    const done = await fullStream('parts:1');
    const doneId = done.find((e) => e.id)!.id!.split(':')[0]!;
    expect((await app.inject({ method: 'POST', url: `/api/v1/runs/${doneId}/cancel` })).json()).toEqual({ runId: doneId, status: 'succeeded' });
    const other = randomUUID().replace(/-/g, '');
    await insertRun(runtime.db.db, { id: other, agentId: 'resumer', sessionId: null, source: 'api', request: { messages: [] }, principal: 'api:someone-else' });
    expect((await app.inject({ method: 'POST', url: `/api/v1/runs/${other}/cancel` })).statusCode).toBe(404);
    expect((await getRun(runtime.db.db, other))!.status).toBe('queued');
  });

  it('refuses what it cannot resume with a clear error: a malformed id, another run, another agent, someone else’s run', async () => {
    const full = await fullStream('parts:1');
    const lastId = full.filter((e) => e.id).at(-1)!.id!;
    const runId = lastId.split(':')[0]!;
    const malformed = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: chatBody('x'), headers: { 'last-event-id': 'run-7' } });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json<{ error: { message: string } }>().error.message).toMatch(/Last-Event-ID must be "<runId>:<seq>"/);
    const notStreamed = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { ...chatBody('x'), stream: false }, headers: { 'last-event-id': lastId } });
    expect(notStreamed.statusCode).toBe(400);
    expect(notStreamed.json<{ error: { message: string } }>().error.message).toMatch(/Last-Event-ID resumes a stream/);
    const otherRun = await app.inject({ method: 'GET', url: `/api/v1/runs/${'a'.repeat(32)}/events`, headers: { 'last-event-id': lastId } });
    expect(otherRun.statusCode).toBe(400);
    const otherAgent = await app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { ...chatBody('x'), model: 'someone-else' }, headers: { 'last-event-id': lastId } });
    expect(otherAgent.statusCode).toBe(400);
    expect(otherAgent.json<{ error: { message: string } }>().error.message).toMatch(/run of agent "resumer"/);
    expect((await app.inject({ method: 'GET', url: `/api/v1/runs/${'b'.repeat(32)}/events` })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/api/v1/runs/${runId}/events?after=x` })).statusCode).toBe(400);
    // Someone else's chat, and a run that is not a chat's: the same 404 as an unknown run.
    for (const [principal, source] of [['api:someone-else', 'api'], ['', 'cron']] as const) {
      const id = randomUUID().replace(/-/g, '');
      await insertRun(runtime.db.db, { id, agentId: 'resumer', sessionId: null, source, request: { messages: [] }, principal });
      const res = await app.inject({ method: 'GET', url: `/api/v1/runs/${id}/events` });
      expect(res.statusCode, `${principal} ${source}`).toBe(404);
      expect(res.json<{ error: string }>().error).toBe(`Not found: run "${id}"`);
    }
  });
});
