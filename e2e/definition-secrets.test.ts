import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRuleChain, type Db } from '@agentry/db';
import { SECRET_MARKER } from '@agentry/definitions';
import { answerMcp, describeWithServers, startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { startGateway } from '@agentry/gateway';
import { bootEmbedded, fakeModelConfig, type EmbeddedRuntime } from './harness.js';

/**
 * Sealed secrets still authenticate (issue 20, finding 3): an MCP server and an HTTP endpoint
 * that demand a header get the plain value from the worker, after the gateway sealed it, after
 * a GET-then-PUT round trip of the definition (what the web editor and `agentry agents get |
 * update` do), and never see the marker; the plain value is in no row, run and log line.
 */
const API_KEY = 'sk-definition-secrets-account-0123';
const MCP_AUTH = 'Bearer mcp-e2e-plain-61a9c3';
const REST_KEY = 'rest-e2e-plain-2b7d10';
const CHAIN_KEY = 'chain-e2e-plain-88ef04';

let fake: FakeModel;
let server: http.Server;
/** What the test server was sent, per path: the header it checks. */
const seen: Array<{ path: string; header: string | undefined }> = [];

/** One server: `/mcp` needs Authorization, `/hook` X-Api-Key, `/chain` X-Chain-Token; else 401. */
function startServer(): Promise<http.Server> {
  const s = http.createServer((req, res) => {
    const url = req.url ?? '';
    const check = (header: string, expected: string) => {
      const got = req.headers[header] as string | undefined;
      seen.push({ path: url, header: got });
      if (got === expected) return true;
      res.writeHead(401, { 'content-type': 'text/plain' }).end('missing or wrong credentials');
      return false;
    };
    if (url.startsWith('/mcp')) {
      if (!check('authorization', MCP_AUTH)) return;
      void answerMcp(req, res, 'vault', (mcp) =>
        mcp.registerTool('whoami', { description: 'Says who the caller is.' }, async () => ({ content: [{ type: 'text', text: 'you are trusted' }] })),
      );
      return;
    }
    if (url === '/hook' && check('x-api-key', REST_KEY)) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('key accepted');
    if (url === '/chain' && check('x-chain-token', CHAIN_KEY)) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('chain accepted');
    if (!res.headersSent) res.writeHead(404).end();
  });
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)));
}

/** A running deployment: where its API is, its database, and everything it logged so far. */
interface Target {
  baseURL: string;
  db: Db;
  logs(): string;
}

async function api(target: Target, method: string, url: string, body?: unknown) {
  const res = await fetch(`${target.baseURL}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, text: await res.text() };
}

async function chat(target: Target, model: string, content: string) {
  const res = await fetch(`${target.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, 'x-stream-protocol': 'agui' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], stream: true }),
  });
  const chunks = (await res.text())
    .split('\n\n')
    .map((e) => e.replace(/^id: [^\n]*\n/, ''))
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)) as { choices?: Array<{ delta: { content?: string; tool_calls?: Array<Record<string, string>> } }>; error?: unknown });
  return {
    tools: chunks.flatMap((c) => c.choices?.[0]?.delta.tool_calls ?? []),
    text: chunks.map((c) => c.choices?.[0]?.delta.content ?? '').join(''),
    errors: chunks.filter((c) => c.error !== undefined),
  };
}

const configLines = () => [
  ...fakeModelConfig(fake),
  `channels: {api: {accounts: {secrets: {api_key: "${API_KEY}"}}}}`,
];

beforeAll(async () => {
  fake = await startFakeModel();
  server = await startServer();
});

afterAll(async () => {
  await Promise.all([fake?.close(), new Promise((r) => server?.close(r))]);
});

/** The agent and the rule chain of the suite, written through the API as a user would. */
async function createDefinitions(target: Target) {
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const rule = await api(target, 'POST', '/rules', {
    ruleChain: { id: 'notify', name: 'Notify' },
    metadata: {
      nodes: [
        { id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: `${origin}/chain`, headers: { 'X-Chain-Token': CHAIN_KEY }, allowHosts: ['127.0.0.1'] } },
      ],
      connections: [],
    },
  });
  if (rule.status !== 201) throw new Error(`rule: ${rule.status} ${rule.text}`);
  const created = await api(target, 'POST', '/agents', {
    ruleChain: { id: 'guarded', name: 'Guarded' },
    metadata: {
      nodes: [
        // The chain calls the endpoint first; its answer becomes the user's turn.
        { id: 'hook', type: 'restApiCall', configuration: { restEndpointUrlPattern: `${origin}/hook`, headers: { 'X-Api-Key': REST_KEY }, allowHosts: ['127.0.0.1'] } },
        {
          id: 'agent',
          type: 'ai/agent',
          configuration: {
            provider: 'fake',
            tools: [
              { type: 'mcp', name: 'vault', config: { url: `${origin}/mcp`, headers: { Authorization: MCP_AUTH }, allowHosts: ['127.0.0.1'] } },
              { type: 'rulechain', name: 'notify', targetId: 'notify', description: 'Notifies.' },
            ],
          },
        },
      ],
      connections: [{ fromId: 'hook', toId: 'agent', type: 'Success' }],
    },
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${created.text}`);
}

/** One chat that uses all three secrets: the chain's restApiCall, the MCP tool and the rule-chain tool. */
async function runAll(target: Target) {
  seen.length = 0;
  fake.script(
    { toolCalls: [{ id: 'v1', name: 'vault__whoami', arguments: '{}' }] },
    { toolCalls: [{ id: 'n1', name: 'notify', arguments: '{"x":1}' }] },
    { text: 'all done' },
  );
  const before = fake.requests.length;
  const result = await chat(target, 'guarded', 'hello');
  return { ...result, firstPrompt: fake.requests[before]?.body.messages.at(-1) };
}

function secretsSuite(target: () => Target): void {
  it('authenticate the MCP server, the chain node and the rule-chain tool with the plain values', async () => {
    const stored = JSON.stringify((await getRuleChain(target().db, 'guarded'))!.dsl) + JSON.stringify((await getRuleChain(target().db, 'notify'))!.dsl);
    for (const plain of [MCP_AUTH, REST_KEY, CHAIN_KEY]) expect(stored).not.toContain(plain);

    const { tools, text, errors, firstPrompt } = await runAll(target());
    expect(errors).toEqual([]);
    expect(firstPrompt).toEqual({ role: 'user', content: 'key accepted' });
    const results = tools.filter((t) => t.type === 'TOOL_CALL_RESULT');
    // A rule-chain tool answers its final message; its data is the endpoint's answer.
    expect(results.map((r) => [r.toolCallName, r.toolCallName === 'notify' ? (JSON.parse(r.content ?? '') as { data: unknown }).data : r.content])).toEqual([
      ['vault__whoami', 'you are trusted'],
      ['notify', 'chain accepted'],
    ]);
    expect(text).toBe('all done');
    expect(seen.find((s) => s.path === '/hook')?.header).toBe(REST_KEY);
    expect(seen.filter((s) => s.path.startsWith('/mcp')).every((s) => s.header === MCP_AUTH)).toBe(true);
    expect(seen.find((s) => s.path === '/chain')?.header).toBe(CHAIN_KEY);
  });

  it('still authenticate after the definitions went through GET then PUT', async () => {
    for (const url of ['/agents/guarded', '/rules/notify']) {
      const got = await api(target(), 'GET', url);
      expect(got.text).toContain(SECRET_MARKER);
      const put = await api(target(), 'PUT', url, JSON.parse(got.text));
      expect(put.status, put.text).toBe(200);
    }
    const { tools, errors, firstPrompt } = await runAll(target());
    expect(errors).toEqual([]);
    expect(firstPrompt).toEqual({ role: 'user', content: 'key accepted' });
    const results = tools.filter((t) => t.type === 'TOOL_CALL_RESULT').map((r) => r.content);
    expect([results[0], (JSON.parse(results[1]!) as { relation: string; data: unknown })]).toEqual(['you are trusted', expect.objectContaining({ relation: 'Success', data: 'chain accepted' })]);
    expect(seen.map((s) => s.header)).not.toContain(SECRET_MARKER);
  });

  it('leave no plain value in runs, sessions or the log', async () => {
    const runs = await target().db.selectFrom('runs').selectAll().execute();
    expect(runs.length).toBeGreaterThan(0);
    const text = JSON.stringify(runs) + target().logs();
    for (const plain of [MCP_AUTH, 'mcp-e2e-plain-61a9c3', REST_KEY, CHAIN_KEY]) expect(text).not.toContain(plain);
  });
}

describe('secrets in definitions at run time, embedded mode', () => {
  let embedded: EmbeddedRuntime | undefined;
  const logLines: string[] = [];
  let target: Target;

  beforeAll(async () => {
    embedded = await bootEmbedded('definition-secrets', ['server: {host: 127.0.0.1, port: 0}', ...configLines()], { log: (line) => void logLines.push(line) });
    const { runtime } = embedded;
    await startAgentWorker(runtime);
    const { port } = await startGateway(runtime);
    runtime.health.markStarted();
    target = { baseURL: `http://127.0.0.1:${port}/api/v1`, db: runtime.db.db, logs: () => logLines.join('') };
    await createDefinitions(target);
  }, 120_000);

  afterAll(async () => {
    await embedded?.stop();
  });

  secretsSuite(() => target);

  it('reads request metadata back as written and only credentials as the marker: found by name, value shape and ?code= (issue 35)', async () => {
    const plain = { 'Ocp-Apim-Subscription-Key': 'sub-key-e2e-5c1f', 'x-functions-key': 'fn-key-e2e-7a2b', 'X-Signature': 'sig-e2e-9d3e', 'X-Custom': 'opaque9f8e7d6c5b4a3921' };
    const benign = { Accept: 'application/json', 'Content-Type': 'application/json', 'User-Agent': 'agentry-e2e/1.0', 'X-Request-Id': '3f2b8c1e-9d4a-4e6f-8a7b-1c2d3e4f5a6b', 'X-Tenant': 'acme' };
    const hook = 'https://fn.example.com/api/hook?code=fn-code-e2e-4b6c';
    const made = await api(target, 'POST', '/rules', {
      ruleChain: { id: 'headers_both', name: 'Headers' },
      metadata: { nodes: [{ id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: hook, headers: { ...benign, ...plain } } }], connections: [] },
    });
    expect(made.status, made.text).toBe(201);
    const read = await api(target, 'GET', '/rules/headers_both');
    expect(read.status).toBe(200);
    const config = (JSON.parse(read.text) as { metadata: { nodes: Array<{ configuration: { restEndpointUrlPattern: string; headers: Record<string, string> } }> } }).metadata.nodes[0]!.configuration;
    expect(config.headers).toEqual({ ...benign, ...Object.fromEntries(Object.keys(plain).map((h) => [h, SECRET_MARKER])) });
    expect(config.restEndpointUrlPattern).toBe(SECRET_MARKER);
    const stored = JSON.stringify((await getRuleChain(target.db, 'headers_both'))!.dsl);
    for (const secret of [...Object.values(plain), hook]) expect(stored).not.toContain(secret);
    for (const value of Object.values(benign)) expect(stored).toContain(value);
  });
});

describeWithServers('secrets in definitions at run time, cluster mode (separate gateway and worker processes)', () => {
  let cluster: TestCluster;
  let target: Target;

  beforeAll(async () => {
    cluster = await startTestCluster({ workers: 1, configLines: configLines() });
    target = { baseURL: cluster.baseURL, db: cluster.db.handle.db, logs: () => cluster.processes.map((p) => p.output()).join('') };
    await createDefinitions(target);
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  secretsSuite(() => target);
});
