import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { builtinTools } from '@agentry/engine';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel, type FakeRequest } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { openaiErrorMessage } from './openai-error.js';

/**
 * Per-user quotas (issue 35 G, `security.quotas`): a plain user may own only so many agents and
 * chat sessions, and an agent of theirs only so many workspace bytes; over a limit is 409
 * `Limit reached: ...` naming it and its setting. Admins are not held. The whole stack: routes,
 * an in-process worker, the fake model.
 */

const PASSWORDS = { admin: 'admin-pass-word-1', alice: 'alice-pass-word-1' };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-quotas-'));
let runtime: Runtime;
let app: FastifyInstance;
let fake: FakeModel;
const tokens = { admin: '', alice: '' };

function call(method: InjectOptions['method'], url: string, token: string, payload?: unknown): Promise<LightMyRequestResponse> {
  return app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
}
const agent = (id: string, configuration: Record<string, unknown> = {}) => ({
  ruleChain: { id, name: id },
  metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', ...configuration } }], connections: [] },
});
const chat = (token: string, model: string, sessionId?: string) =>
  call('POST', '/chat/completions', token, { model, messages: [{ role: 'user', content: 'hello' }], ...(sessionId ? { sessionId } : {}) });
const write = (token: string, agentId: string, file: string, bytes: number) => call('PUT', `/agents/${agentId}/workspace/file?path=${file}`, token, { content: 'x'.repeat(bytes) });

beforeAll(async () => {
  fake = await startFakeModel();
  const cwd = fs.mkdtempSync(path.join(tmp, 'rt-'));
  fs.writeFileSync(
    path.join(cwd, 'config.yaml'),
    [
      'server: {host: 127.0.0.1}',
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
      'security:',
      '  requireAuth: true',
      '  quotas: {agentsPerUser: 2, sessionsPerUser: 2, workspaceBytesPerAgent: 100}',
      '  users:',
      ...Object.entries(PASSWORDS).map(([u, p]) => `    ${u}: "${p}"`),
    ].join('\n'),
  );
  runtime = await bootstrap({
    service: 'quotas',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'quotas-master-key-0123456789-abcdef' },
    cwd,
    logDestination: { write: () => {} },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await startAgentWorker(runtime, { builtin: builtinTools });
  await seedGateway(runtime);
  app = await buildGateway(runtime);
  await app.ready();
  runtime.health.markStarted();
  for (const user of Object.keys(tokens) as Array<keyof typeof tokens>) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: user, password: PASSWORDS[user] } });
    tokens[user] = (res.json() as { token: string }).token;
  }
}, 120_000);

afterAll(async () => {
  await app?.close();
  await runtime?.lifecycle.shutdown('test');
  await fake?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('security.quotas', { timeout: 120_000 }, () => {
  it('agentsPerUser: a user owns at most that many agents; deleting one frees a place; admins are not held', async () => {
    expect((await call('POST', '/agents', tokens.alice, agent('alice_1'))).statusCode).toBe(201);
    expect((await call('POST', '/agents', tokens.alice, agent('alice_2'))).statusCode).toBe(201);
    const over = await call('POST', '/agents', tokens.alice, agent('alice_3'));
    expect(over.statusCode).toBe(409);
    expect(over.json()).toEqual({ error: 'Limit reached: you already own 2 agents (the limit is 2, security.quotas.agentsPerUser): delete one first' });
    expect((await call('GET', '/agents/alice_3', tokens.admin)).statusCode).toBe(404);
    for (const id of ['admin_1', 'admin_2', 'admin_3']) expect((await call('POST', '/agents', tokens.admin, agent(id))).statusCode).toBe(201);
    expect((await call('DELETE', '/agents/alice_2', tokens.alice)).statusCode).toBe(200);
    expect((await call('POST', '/agents', tokens.alice, agent('alice_3'))).statusCode).toBe(201);
  });

  it('sessionsPerUser: a new session past the limit is refused, an existing one and a chat without a session go on; admins are not held', async () => {
    for (const s of ['s1', 's2']) {
      const res = await chat(tokens.alice, 'admin_1', s);
      expect(res.statusCode, res.body).toBe(200);
    }
    const over = await chat(tokens.alice, 'admin_1', 's3');
    expect(over.statusCode).toBe(409);
    expect(openaiErrorMessage(over.json())).toBe(
      'Limit reached: you already have 2 chat sessions (the limit is 2, security.quotas.sessionsPerUser): delete old ones (DELETE /sessions/{id}) first',
    );
    // Another agent is no way around it: the limit is over every agent.
    expect((await chat(tokens.alice, 'alice_1', 's3')).statusCode).toBe(409);
    expect((await chat(tokens.alice, 'admin_1', 's1')).statusCode).toBe(200);
    expect((await chat(tokens.alice, 'admin_1')).statusCode).toBe(200);
    for (const s of ['a1', 'a2', 'a3']) expect((await chat(tokens.admin, 'admin_1', s)).statusCode).toBe(200);
    const sessions = (await call('GET', '/sessions', tokens.alice)).json() as { data: Array<{ id: string; sessionKey?: string }>; total: number };
    expect(sessions.total).toBe(2);
    expect((await call('DELETE', `/sessions/${sessions.data[0]!.id}`, tokens.alice)).statusCode).toBe(200);
    expect((await chat(tokens.alice, 'admin_1', 's3')).statusCode).toBe(200);
  });

  it('workspaceBytesPerAgent: the files of a user agent stay under the limit (a replaced file counts once); an admin writing is not held', async () => {
    expect((await write(tokens.alice, 'alice_1', 'AGENTS.md', 0)).statusCode).toBe(200);
    expect((await write(tokens.alice, 'alice_1', 'a.txt', 60)).statusCode).toBe(200);
    expect((await call('POST', '/agents/alice_1/workspace/files', tokens.alice, { path: 'b.txt', content: 'y'.repeat(40) })).statusCode).toBe(201);
    const over = await write(tokens.alice, 'alice_1', 'c.txt', 1);
    expect(over.statusCode).toBe(409);
    expect(over.json()).toEqual({
      error: 'Limit reached: the workspace of agent "alice_1" would hold 101 bytes of files (the limit is 100, security.quotas.workspaceBytesPerAgent): delete files first',
    });
    expect((await call('POST', '/agents/alice_1/workspace/files', tokens.alice, { path: 'c.txt', content: 'z' })).statusCode).toBe(409);
    expect((await call('GET', '/agents/alice_1/workspace/file?path=c.txt', tokens.alice)).statusCode).toBe(404);
    // Overwriting a file counts its new size only.
    expect((await write(tokens.alice, 'alice_1', 'a.txt', 10)).statusCode).toBe(200);
    expect((await write(tokens.alice, 'alice_1', 'c.txt', 50)).statusCode).toBe(200);
    expect((await write(tokens.admin, 'alice_1', 'big.txt', 500)).statusCode).toBe(200);
  });

  it("workspaceBytesPerAgent holds the agent's own write tool too (its error goes to the model); an admin's agent is not held", async () => {
    const tools = { tools: [{ type: 'builtin', name: 'write' }] };
    expect((await call('PUT', '/agents/alice_3', tokens.alice, agent('alice_3', tools))).statusCode).toBe(200);
    expect((await call('PUT', '/agents/admin_1', tokens.admin, agent('admin_1', tools))).statusCode).toBe(200);
    expect((await write(tokens.alice, 'alice_3', 'AGENTS.md', 0)).statusCode).toBe(200);
    const toolAnswer = async (token: string, model: string, file: string, bytes: number) => {
      fake.script({ toolCalls: [{ id: 'w1', name: 'write', arguments: JSON.stringify({ path: file, content: 'q'.repeat(bytes), mode: 'overwrite' }) }] }, (req: FakeRequest) => {
        const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
        return { text: String(result?.content ?? '(no tool result)') };
      });
      const res = await chat(token, model);
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
    };
    expect(await toolAnswer(tokens.alice, 'alice_3', 'notes.txt', 80)).toMatch(/notes\.txt/);
    const refused = await toolAnswer(tokens.alice, 'alice_3', 'more.txt', 30);
    expect(refused).toContain('the workspace of agent "alice_3" would hold 110 bytes of files (the limit is 100, security.quotas.workspaceBytesPerAgent)');
    expect((await call('GET', '/agents/alice_3/workspace/file?path=more.txt', tokens.alice)).statusCode).toBe(404);
    // Whoever chats, an admin's agent is not held.
    expect(await toolAnswer(tokens.alice, 'admin_1', 'big.txt', 500)).not.toContain('Limit reached');
    expect((await call('GET', '/agents/admin_1/workspace/file?path=big.txt', tokens.admin)).json()).toEqual({ content: 'q'.repeat(500) });
  });
});
