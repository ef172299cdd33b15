import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { appendMessages, ensureSession, finishRun, insertRun } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

/**
 * Response schemas are the contract of the REST API: the OpenAPI document shows them, the client
 * derives its types from them, and fastify serializes every answer with them, dropping what a
 * schema leaves out. So every JSON route must declare its success answer, and a schema that
 * forgets a field the handler sends must fail here rather than silently shrink an answer.
 */

/** Answers that are not JSON, so no serializer schema applies to them. */
const NON_JSON: ReadonlyArray<{ method: string; url: string; why: string }> = [
  { method: 'GET', url: '/health', why: 'the spec answers plain text `OK`' },
  { method: 'GET', url: '/metrics', why: "Prometheus' text exposition format" },
  { method: 'GET', url: '/api/v1/openapi.json', why: 'the OpenAPI document itself; its schema is the OpenAPI specification' },
  {
    method: 'POST',
    url: '/api/v1/chat/completions',
    why: 'an SSE stream (`stream: true`) written on the raw reply; its OpenAI shapes are the encoders of chat/openai-chunks.ts',
  },
  { method: 'GET', url: '/api/v1/runs/:runId/events', why: 'an SSE stream, the same chat.completion.chunk events as a streamed chat (chat/openai-chunks.ts)' },
  { method: 'GET', url: '/api/v1/agents/:agentId/workspace/download', why: "the file's raw bytes" },
  {
    method: 'GET',
    url: '/api/v1/channels/:platform/accounts/:accountId/events',
    why: 'a platform checking the URL is answered with its own echo (WeCom, DingTalk), not JSON',
  },
  {
    method: 'POST',
    url: '/api/v1/channels/:platform/accounts/:accountId/events',
    why: "each platform is answered in its own format (a challenge echo, a plain-text or JSON acknowledgement)",
  },
  { method: 'GET', url: '/', why: 'the web UI: files' },
  { method: 'GET', url: '/*', why: 'the web UI: files' },
];

const ADMIN_PASSWORD = 'admin-password-for-the-schema-test';
const CONFIG = [
  'models:',
  '  default_provider: p1',
  '  providers:',
  '    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-provider-secret, models: [{name: m1, alias: default}]}',
  'security:',
  `  users: {admin: "${ADMIN_PASSWORD}"}`,
].join('\n');

/** An agent whose DSL carries keys no schema names, at every level (RuleGo editors add them). */
const AGENT = {
  ruleChain: { id: 'schema_agent', name: 'Schema', additionalInfo: { category: 'agents', layout: { x: 1 } }, editorVersion: 3 },
  metadata: {
    firstNodeIndex: 0,
    nodes: [
      { id: 'node_agent', type: 'ai/agent', name: 'Agent', configuration: { provider: 'p1', systemPrompt: 'Be brief.', maxStep: 10 }, position: { x: 10, y: 20 } },
      { id: 'node_end', type: 'end' },
    ],
    connections: [{ fromId: 'node_agent', toId: 'node_end', type: 'Success', label: 'ok' }],
    ruleChainConnections: [],
  },
};

describe('response schemas', () => {
  let app: FastifyInstance;
  let runtime: Runtime;
  let cwd = '';
  /** What each handler handed to the serializer, by request id. */
  const handed = new Map<string, unknown>();

  beforeAll(async () => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-schemas-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), CONFIG);
    runtime = await bootstrap({
      service: 'gateway-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'test-master-key-0123456789-abcdefghij' },
      cwd,
      logDestination: { write: () => {} },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    await seedGateway(runtime);
    app = await buildGateway(runtime);
    app.addHook('preSerialization', async (req, _reply, payload) => {
      // What plain JSON would have sent: the reference a schema-serialized answer must equal.
      handed.set(req.id, JSON.parse(JSON.stringify(payload)));
      return payload;
    });
    await app.ready();
    runtime.health.markStarted();
  });

  afterAll(async () => {
    await app?.close();
    await runtime?.lifecycle.shutdown('test');
    if (cwd) fs.rmSync(cwd, { recursive: true, force: true });
  });

  const call = async (method: InjectOptions['method'], url: string, opts: { body?: unknown; token?: string } = {}) => {
    const res = await app.inject({
      method,
      url,
      ...(opts.body === undefined ? {} : { payload: opts.body as InjectOptions['payload'] }),
      ...(opts.token ? { headers: { authorization: `Bearer ${opts.token}` } } : {}),
    });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res;
  };

  it('every JSON route declares a 2xx response schema', () => {
    const missing = app.routeAccess
      .filter((r) => r.method !== 'HEAD' && !(r.method === 'OPTIONS' && r.url === '*'))
      .filter((r) => !NON_JSON.some((n) => n.method === r.method && n.url === r.url))
      .filter((r) => !r.responses.some((code) => code.startsWith('2')))
      .map((r) => `${r.method} ${r.url}`);
    expect(missing).toEqual([]);
    // The walk saw the families it guards.
    expect(app.routeAccess.find((r) => r.method === 'GET' && r.url === '/api/v1/agents')?.responses).toEqual(['200']);
  });

  it('every answer of these families carries every field its handler sent, unchanged', async () => {
    const login = (await call('POST', '/api/v1/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } })).json() as { token: string };
    const token = login.token;
    const requests: Array<[InjectOptions['method'], string, { body?: unknown; token?: string }?]> = [
      ['GET', '/ready'],
      ['GET', '/api/v1/auth/status', { token }],
      ['GET', '/api/v1/auth/api-key', { token }],
      ['POST', '/api/v1/auth/api-key', { token }],
      ['GET', '/api/v1/auth/api-key', { token }],
      ['GET', '/api/v1/users'],
      ['POST', '/api/v1/users', { body: { username: 'ann', password: 'ann-password-long-enough', role: 'user' } }],
      ['PUT', '/api/v1/users/ann', { body: { disabled: true } }],
      ['DELETE', '/api/v1/users/ann'],
      ['GET', '/api/v1/config'],
      ['PUT', '/api/v1/config', { body: { server: { port: 9528 } } }],
      ['GET', '/api/v1/tools'],
      ['GET', '/api/v1/tools/forms'],
      ['GET', '/api/v1/agent-template'],
      ['POST', '/api/v1/agents', { body: AGENT }],
      ['GET', '/api/v1/agents'],
      ['GET', `/api/v1/agents/${AGENT.ruleChain.id}`],
      ['PUT', `/api/v1/agents/${AGENT.ruleChain.id}`, { body: AGENT }],
      ['POST', `/api/v1/agents/${AGENT.ruleChain.id}/reload`],
      ['GET', '/api/v1/models', { token }],
      ['GET', `/api/v1/models/${AGENT.ruleChain.id}`, { token }],
      ['POST', `/api/v1/agents/${AGENT.ruleChain.id}/rules`, { body: ruleDsl('schema_rule') }],
      ['GET', '/api/v1/rules'],
      ['GET', '/api/v1/rules/schema_rule'],
      ['GET', `/api/v1/agents/${AGENT.ruleChain.id}/rules`],
      ['GET', `/api/v1/agents/${AGENT.ruleChain.id}/rules/schema_rule`],
      ['POST', '/api/v1/rules/schema_rule/reload'],
      ['POST', '/api/v1/rules', { body: ruleDsl('schema_global') }],
      ['PUT', '/api/v1/rules/schema_global', { body: ruleDsl('schema_global') }],
      ['DELETE', '/api/v1/rules/schema_global'],
      ['GET', '/api/v1/sessions'],
      ['POST', '/api/v1/sessions/clear', { body: { agentId: 'nobody' } }],
      ['PUT', '/api/v1/auth/password', { token, body: { oldPassword: ADMIN_PASSWORD, newPassword: 'a-new-admin-password-0' } }],
    ];
    // A stored response of the admin's, as POST /responses keeps it (the provider here answers nobody).
    const runId = 'ab'.repeat(16);
    const stored = {
      model: AGENT.ruleChain.id, instructions: 'Be brief.', previousResponseId: null, temperature: 0.2, topP: null, maxOutputTokens: 50,
      toolChoice: 'auto', metadata: { k: 'v' }, textFormat: { type: 'text' }, background: true, inputRoles: ['developer', 'user', 'assistant'],
    };
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'system', content: 'rules' }, { role: 'user', content: 'hi' }, { role: 'assistant', content: 'before' }];
    // Before the password change at the end, which ends the token.
    requests.splice(
      requests.length - 1,
      0,
      ['GET', `/api/v1/responses/resp_${runId}`, { token }],
      ['GET', `/api/v1/responses/resp_${runId}/input_items?order=asc&limit=2`, { token }],
      ['POST', `/api/v1/responses/resp_${runId}/cancel`, { token }],
      ['DELETE', `/api/v1/responses/resp_${runId}`, { token }],
    );
    // The session is made once the agent exists (it references it); its messages are read last.
    let sessionId: string | undefined;
    for (const [method, url, opts] of requests) {
      if (url === '/api/v1/sessions' && !sessionId) {
        const s = await ensureSession(runtime.db.db, { agentId: AGENT.ruleChain.id, sessionKey: 'k1', scope: 'per_peer', owner: 'user:admin' });
        await appendMessages(runtime.db.db, s.id, 'run-1', [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{}' } }] },
          { role: 'tool', content: 'done', toolCallId: 'c1', name: 'read' },
        ]);
        sessionId = s.id;
        requests.push(['GET', `/api/v1/sessions/${s.id}/messages`]);
      }
      if (url === `/api/v1/responses/resp_${runId}` && method === 'GET') {
        await insertRun(runtime.db.db, { id: runId, agentId: AGENT.ruleChain.id, sessionId: null, source: 'api', request: { messages, response: stored }, principal: 'user:admin' });
        await finishRun(runtime.db.db, runId, { status: 'succeeded', output: 'hello', usage: { promptTokens: 3, completionTokens: 1, totalTokens: 4 } });
      }
      const res = await call(method, url, opts);
      const sent = handed.get(String(res.headers['x-request-id']));
      expect(sent, `${method} ${url} went through the serializer`).toBeDefined();
      expect(res.json(), `${method} ${url}`).toEqual(sent);
    }
    expect(requests.some(([, url]) => url.endsWith('/messages'))).toBe(true);
  });

  it('a representative answer of each family is the full object the spec and the clients read', async () => {
    const agent = { ...AGENT, ruleChain: { ...AGENT.ruleChain, id: 'schema_agent_2' } };
    expect((await call('POST', '/api/v1/agents', { body: agent })).body).toBe(JSON.stringify(agent));
    expect((await call('GET', '/api/v1/agents?size=100')).json().data).toContainEqual({ ruleChain: { id: 'schema_agent_2', name: 'Schema', owner: expect.any(String), audience: { everyone: true, users: [], roles: [], apiAccounts: [] } } });
    const rules = (await call('GET', '/api/v1/rules?agentId=schema_agent_2')).json();
    expect(rules).toEqual([]);
    const all = (await call('GET', '/api/v1/rules')).json() as Array<{ ruleChain: { id: string } }>;
    expect(all.find((r) => r.ruleChain.id === 'schema_agent_2')).toEqual({ ruleChain: agent.ruleChain, metadata: agent.metadata, kind: 'agent', loaded: true });

    const user = (await call('POST', '/api/v1/users', { body: { username: 'bob', password: 'bob-password-long-enough', role: 'user' } })).json();
    expect(user).toEqual({ username: 'bob', role: 'user', disabled: false, hasApiKey: false, source: 'api', createdAt: expect.any(String), updatedAt: expect.any(String) });

    const s = await ensureSession(runtime.db.db, { agentId: 'schema_agent_2', sessionKey: 'k2', channel: 'api', scope: 'per_peer', owner: 'user:bob' });
    await appendMessages(runtime.db.db, s.id, 'run-2', [{ role: 'tool', content: 'out', toolCallId: 'c9', name: 'read', toolCalls: null }]);
    const sessions = (await call('GET', '/api/v1/sessions?agentId=schema_agent_2')).json();
    expect(sessions).toEqual({
      data: [
        {
          id: s.id,
          agentId: 'schema_agent_2',
          sessionKey: 'k2',
          channel: 'api',
          scope: 'per_peer',
          owner: 'user:bob',
          title: expect.any(String),
          messageCount: expect.any(Number),
          turnCount: expect.any(Number),
          createdAt: expect.any(String),
          updatedAt: expect.any(String),
        },
      ],
      total: 1,
      page: 1,
      size: 20,
    });
    expect((await call('GET', `/api/v1/sessions/${s.id}/messages`)).json()).toEqual([
      { role: 'tool', content: 'out', toolCallId: 'c9', name: 'read', runId: 'run-2', createdAt: expect.any(String) },
    ]);

    const config = (await call('GET', '/api/v1/config')).json();
    expect(config).toEqual({
      server: expect.objectContaining({ host: expect.any(String), port: expect.any(Number) }),
      data: expect.objectContaining({ root_dir: expect.any(String), logs_dir: expect.any(String) }),
      models: expect.objectContaining({
        default_provider: 'p1',
        providers: { p1: { id: 'p1', name: 'One', base_url: 'http://127.0.0.1:1/v1', model: 'm1', models: [{ name: 'm1', alias: 'default' }] } },
      }),
      security: expect.objectContaining({ requireAuth: false, users: expect.objectContaining({ admin: true, bob: true }) }),
    });

    const tools = (await call('GET', '/api/v1/tools')).json() as Array<Record<string, unknown>>;
    for (const tool of tools) expect(Object.keys(tool).sort()).toEqual(['description', 'name', 'optIn', 'parameters']);
    expect(Object.keys((await call('GET', '/api/v1/tools/forms')).json()).sort()).toEqual(['nodes', 'toolEntry', 'toolKindForms', 'toolKinds', 'tools']);

    const login = (await call('POST', '/api/v1/auth/login', { body: { username: 'bob', password: 'bob-password-long-enough' } })).json();
    expect(login).toEqual({ token: expect.any(String), expireAt: expect.any(String) });
    expect((await call('GET', '/api/v1/auth/status', { token: login.token })).json()).toEqual({ requireAuth: false, user: { username: 'bob', role: 'user' } });
    expect((await call('GET', '/api/v1/auth/api-key', { token: login.token })).json()).toEqual({ apiKey: null });
    const models = (await call('GET', '/api/v1/models', { token: login.token })).json();
    expect(models.object).toBe('list');
    expect(models.data).toContainEqual({ id: 'schema_agent_2', object: 'model', created: expect.any(Number), owned_by: 'agentry' });
  });
});

function ruleDsl(id: string) {
  return {
    ruleChain: { id, name: `Rule ${id}`, additionalInfo: { category: 'schema' } },
    metadata: {
      nodes: [
        { id: 'filter', type: 'jsFilter', configuration: { jsScript: 'return true;' }, position: { x: 1 } },
        { id: 'log', type: 'log' },
      ],
      connections: [{ fromId: 'filter', toId: 'log', type: 'True' }],
    },
  };
}
