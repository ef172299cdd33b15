import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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

/**
 * Issue 35, part C: references are owned. Findings 3 (a user's agent naming an admin's chain that
 * holds allowPrivateNetworks and a sealed Authorization header reached the internal service with
 * the admin's token, on a path the user chose) and 6 (a targetId that did not exist yet could be
 * created by another user, whose chain then ran inside the victim's run), and sub-agent calls
 * obeying the called agent's audience, through the whole stack on a requireAuth server. Each
 * refusal has a control case that does reach the canary, so the assertions can fail.
 */

const PASSWORDS = { admin: 'admin-pass-word-1', alice: 'alice-pass-word-1', bob: 'bob-pass-word-1' };
const TOKEN = 'Bearer internal-admin-token-0123456789';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-refs-'));
let runtime: Runtime;
let app: FastifyInstance;
let fake: FakeModel;
let canary: http.Server;
let canaryUrl = '';
/** What the internal service saw: the path and the Authorization header of every request. */
const hits: Array<{ url: string; authorization: string | undefined }> = [];
const tokens = { admin: '', alice: '', bob: '' };

function call(method: InjectOptions['method'], url: string, token: string, payload?: unknown): Promise<LightMyRequestResponse> {
  return app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
}

function expectStatus(res: LightMyRequestResponse, status: number, message?: RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  if (message) expect((res.json() as { error: string }).error).toMatch(message);
}

const agentNode = (configuration: Record<string, unknown> = {}) => ({ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: 'You help.', ...configuration } });

function agent(id: string, configuration: Record<string, unknown> = {}) {
  return { ruleChain: { id, name: id }, metadata: { nodes: [agentNode(configuration)], connections: [] } };
}

/** The admin's internal call: private network, a sealed token, and a path from the caller's message. */
function internalChain(id: string, sharing: Record<string, unknown>) {
  return {
    ruleChain: { id, name: id, configuration: sharing },
    metadata: {
      nodes: [{ id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: `${canaryUrl}/\${msg.path}`, requestMethod: 'GET', headers: { Authorization: TOKEN }, allowPrivateNetworks: true } }],
      connections: [],
    },
  };
}

/** The model calls `tool` with `args`, then answers with the tool's result as its text. */
function scriptToolCall(tool: string, args: Record<string, unknown>): void {
  fake.script({ toolCalls: [{ name: tool, arguments: JSON.stringify(args) }] }, (req: FakeRequest) => {
    const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
    return { text: String(result?.content ?? '(no tool result)') };
  });
}

async function chatAnswer(token: string, model: string): Promise<string> {
  const res = await call('POST', '/chat/completions', token, { model, messages: [{ role: 'user', content: 'go' }] });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
}

beforeAll(async () => {
  fake = await startFakeModel();
  canary = http.createServer((req, res) => {
    hits.push({ url: req.url ?? '', authorization: req.headers.authorization });
    res.end('internal answer');
  });
  await new Promise<void>((resolve) => canary.listen(0, '127.0.0.1', resolve));
  canaryUrl = `http://127.0.0.1:${(canary.address() as AddressInfo).port}`;
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
      '  users:',
      ...Object.entries(PASSWORDS).map(([u, p]) => `    ${u}: "${p}"`),
    ].join('\n'),
  );
  runtime = await bootstrap({
    service: 'authority-refs',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'authority-refs-master-key-0123456789' },
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
  await new Promise((resolve) => canary?.close(resolve));
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe("finding 3: an admin's chain runs for a user's agent only as shared, with the user's powers", { timeout: 60_000 }, () => {
  it('not shared: the save is refused and nothing reaches the internal service', async () => {
    expectStatus(await call('POST', '/rules', tokens.admin, internalChain('internal_private', {})), 201);
    expectStatus(
      await call('POST', '/agents', tokens.alice, agent('alice_private_ref', { tools: [{ type: 'rulechain', name: 'internal', targetId: 'internal_private' }] })),
      403,
      /tools\[0\]\.targetId: chain "internal_private" belongs to another user and is not shared with "alice"/,
    );
  });

  it('shared but not lent: its sealed token and private network do not run for the user, at save or at run time', async () => {
    expectStatus(await call('POST', '/rules', tokens.admin, internalChain('internal_shared', { shared: true })), 201);
    const tool = { type: 'rulechain', name: 'internal', targetId: 'internal_shared' };
    expectStatus(await call('POST', '/agents', tokens.alice, agent('alice_tool_ref', { tools: [tool] })), 403, /holds its owner's credentials and does not lend them/);

    // Saved while the admin lent it (the control: it reaches the service), then no longer lent.
    expectStatus(await call('PUT', '/rules/internal_shared', tokens.admin, internalChain('internal_shared', { shared: true, lendPowers: true })), 200);
    expectStatus(await call('POST', '/agents', tokens.alice, agent('alice_tool_ref', { tools: [tool] })), 201);
    hits.length = 0;
    scriptToolCall('internal', { path: 'alice-chose-this' });
    await chatAnswer(tokens.alice, 'alice_tool_ref');
    expect(hits).toEqual([{ url: '/alice-chose-this', authorization: TOKEN }]);

    expectStatus(await call('PUT', '/rules/internal_shared', tokens.admin, internalChain('internal_shared', { shared: true })), 200);
    hits.length = 0;
    scriptToolCall('internal', { path: 'admin-only' });
    const answer = await chatAnswer(tokens.alice, 'alice_tool_ref');
    expect(hits).toEqual([]);
    expect(answer).toMatch(/holds its owner's credentials and does not lend them/);
  });

  it('through a flow node, and once the admin stops sharing: refused at run time with a human error', async () => {
    expectStatus(await call('POST', '/rules', tokens.admin, internalChain('internal_flow', { shared: true, lendPowers: true })), 201);
    const flowAgent = {
      ruleChain: { id: 'alice_flow_ref', name: 'alice_flow_ref' },
      metadata: { nodes: [{ id: 'f', type: 'flow', configuration: { targetId: 'internal_flow' } }, agentNode()], connections: [{ fromId: 'f', toId: 'agent', type: 'Success' }] },
    };
    expectStatus(await call('POST', '/agents', tokens.alice, flowAgent), 201);
    expectStatus(await call('PUT', '/rules/internal_flow', tokens.admin, internalChain('internal_flow', {})), 200);
    hits.length = 0;
    const res = await call('POST', '/chat/completions', tokens.alice, { model: 'alice_flow_ref', messages: [{ role: 'user', content: '{"path":"x"}' }] });
    expect(hits).toEqual([]);
    expect(res.body).toMatch(/chain \\?"internal_flow\\?" belongs to another user and is not shared with \\?"alice\\?"/);
  });
});

describe('finding 6: a reference never dangles, so nobody can fill it', { timeout: 60_000 }, () => {
  it('naming a chain or agent that does not exist is a 400 naming the field and the id', async () => {
    expectStatus(
      await call('POST', '/agents', tokens.alice, agent('alice_dangling', { tools: [{ type: 'rulechain', name: 't', targetId: 'not_yet' }] })),
      400,
      /metadata\.nodes\[0\]\.configuration\.tools\[0\]\.targetId: rule chain "not_yet" does not exist/,
    );
    expectStatus(await call('POST', '/rules', tokens.alice, { ruleChain: { id: 'alice_flow_dangling', name: 'x' }, metadata: { nodes: [{ id: 'f', type: 'flow', configuration: { targetId: 'nobody_yet' } }], connections: [] } }), 400, /configuration\.targetId: rule chain "nobody_yet" does not exist/);
    // So bob's chain of that name, made afterwards, is named by nothing of alice's.
    expectStatus(await call('POST', '/rules', tokens.bob, { ruleChain: { id: 'not_yet', name: 'x', configuration: { shared: true } }, metadata: { nodes: [{ id: 'l', type: 'log', configuration: {} }], connections: [] } }), 201);
  });

  it('deleting what another definition names is a 409 naming it (or counting what the caller may not see)', async () => {
    expectStatus(await call('POST', '/rules', tokens.alice, { ruleChain: { id: 'alice_chain', name: 'x', configuration: { shared: ['bob'] } }, metadata: { nodes: [{ id: 'l', type: 'log', configuration: {} }], connections: [] } }), 201);
    expectStatus(await call('POST', '/agents', tokens.alice, agent('alice_user', { tools: [{ type: 'rulechain', name: 't', targetId: 'alice_chain' }] })), 201);
    expectStatus(await call('POST', '/agents', tokens.bob, agent('bob_agent')), 201);
    expectStatus(await call('POST', '/agents/bob_agent/rules', tokens.bob, { ruleChain: { id: 'bob_rule', name: 'x' }, metadata: { nodes: [{ id: 'f', type: 'flow', configuration: { targetId: 'alice_chain' } }], connections: [] } }), 201);

    expectStatus(await call('DELETE', '/rules/alice_chain', tokens.alice), 409, /rule chain "alice_chain" is used by agent "alice_user", 1 definition of other users/);
    expectStatus(await call('DELETE', '/rules/alice_chain', tokens.admin), 409, /used by agent "alice_user", rule chain "bob_rule"/);
    expectStatus(await call('GET', '/rules/alice_chain', tokens.alice), 200);
    // Once nothing names it, it goes.
    expectStatus(await call('DELETE', '/agents/bob_agent', tokens.bob), 200);
    expectStatus(await call('PUT', '/agents/alice_user', tokens.alice, agent('alice_user')), 200);
    expectStatus(await call('DELETE', '/rules/alice_chain', tokens.alice), 200);
  });

  it('an agent named as a sub-agent cannot be deleted either, nor its rules through it', async () => {
    expectStatus(await call('POST', '/agents', tokens.alice, agent('alice_helper')), 201);
    expectStatus(await call('POST', '/agents', tokens.alice, agent('alice_boss', { tools: [{ type: 'agent', name: 'helper', targetId: 'alice_helper' }] })), 201);
    expectStatus(await call('DELETE', '/agents/alice_helper', tokens.alice), 409, /agent "alice_helper" is used by agent "alice_boss"/);
  });
});

describe('sub-agent calls obey the called agent\'s audience', { timeout: 60_000 }, () => {
  it("a user's agent may call an admin's agent only while it is shared, with whoever asks in its audience", async () => {
    expectStatus(await call('POST', '/agents', tokens.admin, agent('admin_helper')), 201);
    expectStatus(await call('PUT', '/agents/admin_helper/audience', tokens.admin, { everyone: false, users: [], roles: [], apiAccounts: [] }), 200);
    const boss = agent('alice_asks_admin', { tools: [{ type: 'agent', name: 'helper', targetId: 'admin_helper' }] });
    expectStatus(await call('POST', '/agents', tokens.alice, boss), 403, /agent "admin_helper" belongs to another user and is not shared with "alice"/);
    expectStatus(await call('PUT', '/agents/admin_helper/audience', tokens.admin, { everyone: false, users: ['alice'], roles: [], apiAccounts: [] }), 200);
    expectStatus(await call('POST', '/agents', tokens.alice, boss), 201);

    // Alice may: the helper answers (the control), and alice's agent repeats its answer.
    fake.script({ toolCalls: [{ name: 'helper', arguments: JSON.stringify({ message: 'hello' }) }] }, { text: 'helper says hi' }, (req: FakeRequest) => {
      const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
      return { text: String(result?.content ?? '(no tool result)') };
    });
    expect(await chatAnswer(tokens.alice, 'alice_asks_admin')).toBe('helper says hi');

    // Bob may chat with alice's agent, not with the helper: the call is refused, the helper never asked.
    expectStatus(await call('PUT', '/agents/alice_asks_admin/audience', tokens.alice, { everyone: false, users: ['bob'], roles: [], apiAccounts: [] }), 200);
    scriptToolCall('helper', { message: 'hello' });
    const answer = await chatAnswer(tokens.bob, 'alice_asks_admin');
    expect(answer).toMatch(/agent "admin_helper" is not shared with user:bob/);
  });
});
