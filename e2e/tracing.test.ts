import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  describeWithServers,
  freePort,
  spawnService,
  startFakeModel,
  startFakeTelegram,
  startTestCluster,
  waitFor,
  type FakeModel,
  type FakePlatform,
  type SpawnedService,
  type TestCluster,
} from '@agentry/testing';

/**
 * Traces across the queue, as an operator's collector sees them: the services export OTLP/HTTP
 * (JSON) to a small receiver here. One chat with a client `traceparent` is one trace (the
 * client's id) whose spans come from the gateway and the worker, parented request -> queue wait
 * -> run -> model call; a failing tool or provider marks its span; the run's log lines carry the
 * trace id. Embedded mode (one process) exports the same trace.
 */

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  service: string;
  status: { code?: number; message?: string };
  attributes: Record<string, unknown>;
  startMs: number;
}

interface Receiver {
  url: string;
  spans: OtlpSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };

function valueOf(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

const attrs = (list: KeyValue[] | undefined) => Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOf(kv.value)]));

/** An OTLP/HTTP receiver for `http/json` trace exports: `POST /v1/traces`. */
async function startReceiver(): Promise<Receiver> {
  const spans: OtlpSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }>;
      };
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)['service.name']);
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              ...(s.parentSpanId ? { parentSpanId: String(s.parentSpanId) } : {}),
              name: String(s.name),
              service,
              status: (s.status ?? {}) as OtlpSpan['status'],
              attributes: attrs(s.attributes as KeyValue[]),
              startMs: Number(BigInt(String(s.startTimeUnixNano)) / 1_000_000n),
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const ERROR = 2;
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
// A rule chain of two nodes, so that the chain runner (and its node spans) is on the path.
const agentDsl = (id: string) => ({
  ruleChain: { id, name: id },
  metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake' } }, { id: 'end', type: 'end' }], connections: [{ fromId: 'a', toId: 'end', type: 'Success' }] },
});
const otelEnv = (receiver: Receiver) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' });

async function chat(baseURL: string, content: string, traceparent?: string): Promise<{ status: number; runId: string }> {
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(traceparent ? { traceparent } : {}) },
    body: JSON.stringify({ model: 'tracer', messages: [{ role: 'user', content }] }),
  });
  const body = (await res.json()) as { id?: string };
  return { status: res.status, runId: String(body.id ?? '').replace(/^chatcmpl-/, '') };
}

/** The spans of one trace once its model call's span has arrived. */
function traceOf(receiver: Receiver, traceId: string): Promise<OtlpSpan[]> {
  return waitFor(async () => {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    return spans.some((s) => s.name === 'agent run') && spans.some((s) => s.name.startsWith('chat ')) && spans.some((s) => s.name.startsWith('POST ')) ? spans : undefined;
  }, 20_000, 100);
}

/** The one span named so (by prefix), with its parent's chain up to the root. */
function one(spans: OtlpSpan[], prefix: string): OtlpSpan {
  const found = spans.filter((s) => s.name.startsWith(prefix));
  expect(found.map((s) => s.name), `spans named ${prefix}`).toHaveLength(1);
  return found[0]!;
}

function ancestors(spans: OtlpSpan[], span: OtlpSpan): string[] {
  const names: string[] = [];
  for (let p = span.parentSpanId; p; ) {
    const parent = spans.find((s) => s.spanId === p);
    if (!parent) break;
    names.push(parent.name);
    p = parent.parentSpanId;
  }
  return names;
}

describeWithServers('traces across the queue (cluster mode)', () => {
  let cluster: TestCluster;
  let fake: FakeModel;
  let receiver: Receiver;
  let tg: FakePlatform;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-tracing-data-'));

  beforeAll(async () => {
    receiver = await startReceiver();
    fake = await startFakeModel();
    tg = await startFakeTelegram();
    cluster = await startTestCluster({
      connectors: 1,
      configLines: [
        'data:',
        `  root_dir: "${dataDir}"`,
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        'reliability: {provider_retries: 0}',
      ],
      env: otelEnv(receiver),
    });
    const res = await fetch(`${cluster.baseURL}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl('tracer')) });
    expect(res.status, await res.text()).toBe(201);
    const account = { id: 'tg', dm_policy: 'allow', group_policy: 'disabled', ...tg.account, binding: { agentId: 'tracer' } };
    const acc = await fetch(`${cluster.baseURL}/channels/chat_d/accounts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(account) });
    expect(acc.status, await acc.text()).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
    await tg?.close();
    await receiver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("an inbound message's reply is sent under the same trace: inbound request -> run -> channel send", async () => {
    fake.script({ text: 'hello from the bot' });
    const { headers, body } = tg.inbound({ eventId: 'e1', chatId: '1001', chatType: 'dm', senderId: '1001', text: 'hi bot' });
    expect((await fetch(`${cluster.baseURL}/channels/chat_d/accounts/tg/events`, { method: 'POST', headers, body })).status).toBe(200);
    const send = await waitFor(async () => receiver.spans.find((s) => s.name === 'channel send chat_d'), 20_000, 100);
    expect(send).toMatchObject({ service: 'agentry-channel-connector', attributes: expect.objectContaining({ 'agentry.channel.account': 'tg' }) });
    expect(send.status.code).not.toBe(ERROR);
    const spans = await waitFor(async () => {
      const all = receiver.spans.filter((s) => s.traceId === send.traceId);
      return ancestors(all, send).includes('POST /api/v1/channels/:platform/accounts/:accountId/events') ? all : undefined;
    }, 10_000, 100);
    expect(ancestors(spans, send)).toEqual(expect.arrayContaining(['agent run', 'queue wait agent-run']));
    expect(tg.sent.map((m) => m.text)).toContain('hello from the bot');
  });

  it("one chat with the client's traceparent is one trace: gateway request -> queue wait -> worker run -> model call", async () => {
    const traceId = hex(32);
    const clientSpan = hex(16);
    fake.script({ text: 'traced answer', usage: { prompt_tokens: 7, completion_tokens: 3 } });
    const { status, runId } = await chat(cluster.baseURL, 'hello', `00-${traceId}-${clientSpan}-01`);
    expect(status).toBe(200);
    const spans = await traceOf(receiver, traceId);

    const request = one(spans, 'POST /api/v1/chat/completions');
    expect(request).toMatchObject({ service: 'agentry-gateway', parentSpanId: clientSpan });
    const wait = one(spans, 'queue wait agent-run');
    expect(wait).toMatchObject({ service: 'agentry-agent-worker', parentSpanId: request.spanId });
    // The wait starts at the run's creation (in the gateway's request), not at the pickup.
    expect(wait.startMs).toBeGreaterThanOrEqual(request.startMs - 5);
    const run = one(spans, 'agent run');
    expect(run).toMatchObject({ service: 'agentry-agent-worker', parentSpanId: wait.spanId });
    expect(run.attributes['agentry.run.id']).toBe(runId);
    const model = one(spans, 'chat ');
    expect(ancestors(spans, model)).toEqual(['chain node ai/agent', 'agent run', 'queue wait agent-run', 'POST /api/v1/chat/completions']);
    expect(model.service).toBe('agentry-agent-worker');
    expect(model.attributes).toMatchObject({ 'gen_ai.system': 'fake', 'agentry.provider': 'fake', 'gen_ai.response.model': 'fake-model', 'gen_ai.usage.input_tokens': 7, 'gen_ai.usage.output_tokens': 3 });
    expect(model.attributes['agentry.ttft_ms']).toBeGreaterThanOrEqual(0);
    const node = one(spans, 'chain node ai/agent');
    expect(node.parentSpanId).toBe(run.spanId);
    expect(node.attributes).toMatchObject({ 'agentry.chain.node.id': 'a', 'agentry.chain.relations': ['Success'] });
    expect(one(spans, 'chain node end').parentSpanId).toBe(run.spanId);
    // Nothing of this run went to another trace.
    expect(receiver.spans.filter((s) => s.attributes['agentry.run.id'] === runId && s.traceId !== traceId)).toEqual([]);

    // Every log line of the run in the worker names the trace; the gateway's enqueue line too.
    const lines = (svcOutput: string) => svcOutput.split('\n').filter((l) => l.startsWith('{') && l.includes(runId)).map((l) => JSON.parse(l) as Record<string, unknown>);
    const workerLines = lines(cluster.local.byRole.worker[0]!.output());
    const gatewayLines = lines(cluster.local.byRole.gateway[0]!.output());
    expect(gatewayLines.find((l) => l.msg === 'run enqueued')).toMatchObject({ trace_id: traceId, span_id: request.spanId });
    expect(workerLines.length).toBeGreaterThan(0);
    for (const l of workerLines) expect(l, String(l.msg)).toMatchObject({ trace_id: traceId });
  });

  it('without a traceparent a trace is started; a failing tool marks its span, the answer still comes', async () => {
    fake.script({ toolCalls: [{ id: 'c1', name: 'no_such_tool', arguments: '{}' }] }, { text: 'done anyway' });
    const { status, runId } = await chat(cluster.baseURL, 'use a tool');
    expect(status).toBe(200);
    const traceId = await waitFor(async () => receiver.spans.find((s) => s.attributes['agentry.run.id'] === runId)?.traceId, 20_000, 100);
    const spans = await traceOf(receiver, traceId);
    expect(one(spans, 'POST /api/v1/chat/completions').parentSpanId).toBeUndefined();
    const tool = one(spans, 'tool no_such_tool');
    expect(tool.status.code).toBe(ERROR);
    expect(tool.status.message).toContain('no tool named');
    expect(ancestors(spans, tool)).toContain('agent run');
  });

  it("a failing provider marks the model call's span as an error", async () => {
    const traceId = hex(32);
    fake.script({ status: 500 });
    const { status } = await chat(cluster.baseURL, 'fail please', `00-${traceId}-${hex(16)}-01`);
    expect(status).toBeGreaterThanOrEqual(500);
    const spans = await traceOf(receiver, traceId);
    expect(one(spans, 'chat ').status.code).toBe(ERROR);
  });
});

describe('traces in embedded mode (one process)', () => {
  let receiver: Receiver;
  let fake: FakeModel;
  let svc: SpawnedService | undefined;
  let cwd: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    fake = await startFakeModel();
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-tracing-'));
  });
  afterAll(async () => {
    await svc?.stop();
    await fake?.close();
    await receiver?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('one chat is one trace across the in-process queue', async () => {
    const port = await freePort();
    const config = ['server: {host: 127.0.0.1, port: ' + String(port) + '}', 'models:', '  default_provider: fake', `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`];
    fs.writeFileSync(path.join(cwd, 'config.yaml'), config.join('\n'));
    svc = spawnService('services/standalone/src/main.ts', { cwd, env: otelEnv(receiver) });
    // A first start makes its database (PGlite's initdb: ~10 s quiet, 34 s seen under CI load).
    await svc.waitForLine(/gateway listening/, 120_000);
    const base = `http://127.0.0.1:${port}/api/v1`;
    expect((await fetch(`${base}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl('tracer')) })).status).toBe(201);
    const traceId = hex(32);
    expect((await chat(base, 'hi', `00-${traceId}-${hex(16)}-01`)).status).toBe(200);
    const spans = await traceOf(receiver, traceId);
    for (const s of spans) expect(s.service).toBe('agentry-standalone');
    const run = one(spans, 'agent run');
    expect(ancestors(spans, run)).toEqual(['queue wait agent-run', 'POST /api/v1/chat/completions']);
    expect(ancestors(spans, one(spans, 'chat '))).toContain('agent run');
  }, 150_000);
});
