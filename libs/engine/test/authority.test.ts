import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimRun, getRuleChain, getRun, getRunSteps, insertRuleChain, insertRun, insertUser, updateRuleChain, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { builtinTools, runAgent, type ModelCallRequest, type ModelEvent, type RunDeps } from '../src/index.js';
import { enter, refusal, validateRuleChain } from '@agentry/definitions';
import { fakeRunDeps } from './fake-run-deps.js';

/**
 * Issue 35, finding 1: authority is decided on the configuration as it runs and for the owner
 * of the definition, never on the text a user wrote. Each case stores its definitions directly
 * (as a definition saved before the save-time check existed would be) and runs them: a stored
 * template in an authority field no longer loads at all, and a literal power runs only for an
 * owner who holds it.
 */

let handle: DbHandle;
/** Calls the canary `bash` tool received: it must never run for a user's agent. */
const bashCalls: string[] = [];
/** Requests the canary HTTP server on 127.0.0.1 received. */
const canaryHits: string[] = [];
let canary: http.Server;
let canaryUrl = '';

const bash = {
  name: 'bash',
  description: 'canary',
  parameters: { type: 'object' },
  run: async (args: Record<string, unknown>) => {
    bashCalls.push(String(args.command));
    return 'uid=0(root)';
  },
};

async function store(id: string, kind: 'agent' | 'rule', owner: string, nodes: JsonValue[], opts: { vars?: Record<string, string>; connections?: Array<[string, string]>; configuration?: Record<string, JsonValue> } = {}): Promise<void> {
  const dsl = {
    ruleChain: { id, name: id, configuration: { ...(opts.configuration ?? {}), ...(opts.vars ? { vars: opts.vars } : {}) } },
    metadata: { nodes, connections: (opts.connections ?? []).map(([fromId, toId]) => ({ fromId, toId, type: 'Success' })) },
  };
  await insertRuleChain(handle.db, { id, kind, agentId: null, name: id, category: null, dsl, owner });
}

const agentWith = (tools: JsonValue[]): JsonValue => ({ id: 'a', type: 'ai/agent', configuration: { provider: 'p', tools } });
const log = { id: 'after', type: 'log', configuration: {} };

/** Calls the first tool it is offered (bash with `id`, a chain with {}), then answers. */
async function* callsFirstTool(req: ModelCallRequest): AsyncIterable<ModelEvent> {
  const last = req.messages.at(-1)!;
  // A sub-agent (no tools of its own) answers who it is.
  if (last.role === 'user' && !req.tools?.length && last.content === 'hello') {
    yield { type: 'text', text: 'helper here' };
    yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
    return;
  }
  if (last.role === 'user' && req.tools?.length) {
    const name = (req.tools[0] as { function: { name: string } }).function.name;
    const args = name === 'bash' ? { command: 'id' } : name === 'helper' ? { message: 'hello' } : name === 'send_message' ? { platform: 'chat_d', chatId: '9', message: 'hi' } : {};
    yield { type: 'tool_calls', calls: [{ id: 'c1', name, arguments: JSON.stringify(args) }] };
    yield { type: 'done', finishReason: 'tool_calls', provider: 'p', model: 'm' };
    return;
  }
  yield { type: 'text', text: 'done' };
  yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
}

let runs = 0;
async function runOf(agentId: string, overrides: Partial<RunDeps> = {}) {
  const id = `run_auth_${++runs}`;
  await insertRun(handle.db, { id, agentId, sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'go' }] }, principal: 'user:alice' });
  const run = (await claimRun(handle.db, id))!;
  const { deps, record } = fakeRunDeps(handle.db, { stream: callsFirstTool, builtin: { bash }, ...overrides });
  await runAgent(deps, run, new AbortController().signal);
  // A run record leaves its steps out; the steps route reads them apart.
  const stored = await getRun(handle.db, id);
  return { record, stored: stored && { ...stored, steps: (await getRunSteps(handle.db, id))?.steps ?? null } };
}

beforeAll(async () => {
  handle = await createTestPglite();
  await insertUser(handle.db, { username: 'alice', passwordHash: 'x', role: 'user' });
  await insertUser(handle.db, { username: 'root', passwordHash: 'x', role: 'admin' });
  canary = http.createServer((req, res) => {
    canaryHits.push(`${req.method} ${req.url}`);
    res.end('internal answer');
  });
  await new Promise<void>((resolve) => canary.listen(0, '127.0.0.1', resolve));
  canaryUrl = `http://127.0.0.1:${(canary.address() as AddressInfo).port}`;

  // Finding 1 as reproduced: the tool's name (or type) comes from the chain's vars.
  await store('alice-vars-name', 'agent', 'alice', [agentWith([{ type: 'builtin', name: '${vars.t}' }]), log], { vars: { t: 'bash' }, connections: [['a', 'after']] });
  await store('alice-vars-type', 'agent', 'alice', [agentWith([{ type: '${vars.ty}', name: 'bash' }]), log], { vars: { ty: 'builtin' }, connections: [['a', 'after']] });
  // Reached through a chain tool: the chain's own ai/agent node names bash through vars.
  await store('alice-chain', 'rule', 'alice', [agentWith([{ type: 'builtin', name: '${vars.t}' }])], { vars: { t: 'bash' } });
  await store('alice-via-tool', 'agent', 'alice', [agentWith([{ type: 'rulechain', name: 'inner', targetId: 'alice-chain' }])]);
  // An admin's chain with bash, used by a user's agent: the user's powers, not the admin's.
  await store('root-chain', 'rule', 'root', [agentWith([{ type: 'builtin', name: 'bash' }])], { configuration: { shared: true } });
  await store('alice-uses-root', 'agent', 'alice', [agentWith([{ type: 'rulechain', name: 'inner', targetId: 'root-chain' }])]);
  // A user's restApiCall to a private address.
  await store('alice-rest', 'agent', 'alice', [{ id: 'r', type: 'restApiCall', configuration: { restEndpointUrlPattern: `${canaryUrl}/x`, requestMethod: 'GET', allowPrivateNetworks: true } }, agentWith([])], { connections: [['r', 'a']] });
  // The control: an admin's own agent keeps its bash.
  await store('root-agent', 'agent', 'root', [agentWith([{ type: 'builtin', name: 'bash' }]), log], { connections: [['a', 'after']] });
  // Written literally into a user's agent (stored before the save-time check, or by an admin): the owner decides.
  await store('alice-literal', 'agent', 'alice', [agentWith([{ type: 'builtin', name: 'bash' }])]);
  // Finding 3: an admin's chain with a private-network switch and a credential, named by a user's agent.
  const internal = (id: string, configuration: Record<string, JsonValue>) =>
    store(id, 'rule', 'root', [{ id: 'r', type: 'restApiCall', configuration: { restEndpointUrlPattern: `${canaryUrl}/internal`, requestMethod: 'GET', headers: { Authorization: 'Bearer root-token' }, allowPrivateNetworks: true } }], { configuration });
  await internal('root-internal-private', {});
  await internal('root-internal-shared', { shared: true });
  await internal('root-internal-lent', { shared: ['alice'], lendPowers: true });
  for (const target of ['root-internal-private', 'root-internal-shared', 'root-internal-lent']) {
    await store(`alice-to-${target}`, 'agent', 'alice', [agentWith([{ type: 'rulechain', name: 'inner', targetId: target }])]);
  }
  // Sub-agents: an admin's agent private to its owner (and admins), and one shared with alice.
  const helper = { ruleChain: { id: 'x', name: 'x' }, metadata: { nodes: [agentWith([])], connections: [] } };
  await insertRuleChain(handle.db, { id: 'root-private-helper', kind: 'agent', agentId: null, name: 'h', category: null, dsl: { ...helper, ruleChain: { id: 'root-private-helper', name: 'h' } }, owner: 'root', audience: { everyone: false, users: [], roles: [], apiAccounts: [] } });
  await insertRuleChain(handle.db, { id: 'root-alice-helper', kind: 'agent', agentId: null, name: 'h', category: null, dsl: { ...helper, ruleChain: { id: 'root-alice-helper', name: 'h' } }, owner: 'root', audience: { everyone: false, users: ['alice'], roles: [], apiAccounts: [] } });
  await store('alice-asks-private', 'agent', 'alice', [agentWith([{ type: 'agent', name: 'helper', targetId: 'root-private-helper' }])]);
  await store('alice-asks-shared', 'agent', 'alice', [agentWith([{ type: 'agent', name: 'helper', targetId: 'root-alice-helper' }])]);
  // Finding 6 on data stored before saves checked references: alice's agent names a chain that
  // does not exist; bob creates it later, shared with everyone. Created after alice's save: refused.
  await store('alice-dangling', 'agent', 'alice', [agentWith([{ type: 'rulechain', name: 'inner', targetId: 'squatted' }])]);
  await new Promise((resolve) => setTimeout(resolve, 20));
  await store('squatted', 'rule', 'bob', [{ id: 'l', type: 'log', configuration: {} }], { configuration: { shared: true } });
  // send_message pinning chat 9 in chatIds: a user's agent, and an admin's.
  const sender = agentWith([{ type: 'builtin', name: 'send_message', config: { chatIds: ['9'] } }]);
  await store('alice-sender', 'agent', 'alice', [sender]);
  await store('root-sender', 'agent', 'root', [sender]);
  // An admin's agent with bash, shared with alice: called by her agent, its bash is left out.
  await insertRuleChain(handle.db, { id: 'root-bash-helper', kind: 'agent', agentId: null, name: 'h', category: null, dsl: { ruleChain: { id: 'root-bash-helper', name: 'h' }, metadata: { nodes: [agentWith([{ type: 'builtin', name: 'bash' }])], connections: [] } }, owner: 'root', audience: { everyone: false, users: ['alice'], roles: [], apiAccounts: [] } });
  await store('alice-asks-bash', 'agent', 'alice', [agentWith([{ type: 'agent', name: 'helper', targetId: 'root-bash-helper' }])]);
  // Slow on a loaded machine: PGlite starts in it.
}, 180_000);

afterAll(async () => {
  await handle?.close();
  await new Promise((resolve) => canary?.close(resolve));
});

describe('authority at the point of use (issue 35, finding 1)', () => {
  it.each(['alice-vars-name', 'alice-vars-type', 'alice-via-tool', 'alice-uses-root', 'alice-literal'])('%s: a user\'s agent never builds bash, however it is named', async (agentId) => {
    bashCalls.length = 0;
    const { record } = await runOf(agentId);
    expect(bashCalls).toEqual([]);
    const offered = record.calls.flatMap((c) => (c.tools ?? []).map((t) => (t as { function: { name: string } }).function.name));
    expect(offered).not.toContain('bash');
  });

  it('a user\'s restApiCall with allowPrivateNetworks never reaches the private address', async () => {
    canaryHits.length = 0;
    const { stored } = await runOf('alice-rest');
    expect(canaryHits).toEqual([]);
    expect(stored?.status).toBe('failed');
    expect(stored?.error).toMatch(/restApiCall.*allowPrivateNetworks lets tools and requests reach private and loopback addresses, so only an admin's definition may use it; this definition belongs to "alice", who is not an admin/);
  });

  it('an admin\'s own agent keeps the powers its owner has', async () => {
    bashCalls.length = 0;
    await runOf('root-agent');
    expect(bashCalls).toEqual(['id']);
  });
});

describe('a refused tool is told to the run (issue 35 follow-up)', () => {
  const steps = (stored: { steps: unknown } | undefined) => (stored?.steps ?? []) as Array<{ type: string; error?: string }>;

  it("a lone agent's refused tool is a step on the run, in the policy's words", async () => {
    const { stored } = await runOf('alice-literal');
    expect(stored?.status).toBe('succeeded');
    const refused = steps(stored).filter((s) => s.type === 'tool refused');
    expect(refused).toHaveLength(1);
    expect(refused[0]!.error).toBe(
      'tool "bash" of agent "alice-literal" was left out: the bash tool runs commands on the worker, so only an admin\'s definition may use it; this definition belongs to "alice", who is not an admin (an admin may give it to an agent of their own, or to a chain of their own that lends its powers: ruleChain.configuration.lendPowers: true)',
    );
  });

  it("another owner's sub-agent's refused tool is a step that names the agent, not its configuration", async () => {
    bashCalls.length = 0;
    const { stored, record } = await runOf('alice-asks-bash');
    expect(bashCalls).toEqual([]);
    expect(toolResult(record)).toContain('helper here');
    const refused = steps(stored).filter((s) => s.type === 'tool refused');
    expect(refused.map((s) => s.error)).toEqual(['a tool of agent "root-bash-helper" (owned by "root") was left out: this run does not have the powers it needs']);
    expect(JSON.stringify(stored?.steps)).not.toContain('bash"');
  });

  it('a run without a refusal keeps no steps when it does not run as a chain', async () => {
    const { stored } = await runOf('alice-asks-shared');
    expect(stored?.steps).toBeNull();
  });
});

describe('the refusal of an admin-only power says who, what and what would allow it', () => {
  const alice = { principal: 'user:alice', agentOwner: 'alice', owner: 'alice', admin: false };
  const bash = { kind: 'tool' as const, type: 'builtin', name: 'bash', config: {} };

  it("names the definition's owner when it is not an admin", () => {
    expect(refusal(alice, bash)).toMatch(/^the bash tool runs commands on the worker, so only an admin's definition may use it; this definition belongs to "alice", who is not an admin \(an admin may give it/);
    expect(refusal(alice, { kind: 'tool', type: 'mcp', name: 'm', config: { allowHosts: ['10.0.0.1'] } })).toMatch(/^allowHosts lets tools and requests reach private and loopback addresses, so only an admin's definition may use it; this definition belongs to "alice"/);
    expect(refusal(alice, { kind: 'tool', type: 'builtin', name: 'bash', config: {} })).not.toContain('is not an admin here');
  });

  it("names the caller whose lack of powers an admin's definition runs with, and the lending switch", async () => {
    const inRoot = await enter(handle.db, alice, 'root');
    expect(inRoot).toMatchObject({ owner: 'root', admin: false, narrowedBy: 'alice' });
    expect(refusal(inRoot, bash)).toBe(
      'the bash tool runs commands on the worker, so only an admin\'s definition may use it; this definition belongs to the admin "root" but runs for a definition of "alice", who is not an admin, and so has only their powers (its owner may lend its own: ruleChain.configuration.lendPowers: true)',
    );
    // Lent: the admin's powers, nothing to explain.
    expect(await enter(handle.db, alice, 'root', true)).not.toHaveProperty('narrowedBy');
    // Back in a user's definition: its own owner is named again.
    expect(await enter(handle.db, inRoot, 'bob')).not.toHaveProperty('narrowedBy');
  });
});

describe('authority fields refuse templates at save', () => {
  it.each([
    [{ type: 'builtin', name: '${vars.t}' }, 'configuration.tools[0].name'],
    [{ type: '${vars.ty}', name: 'bash' }, 'configuration.tools[0].type'],
    [{ type: 'rulechain', name: 'x', targetId: '${metadata.id}' }, 'configuration.tools[0].targetId'],
    [{ type: 'builtin', name: 'bash', config: { sandbox: '${global.s}' } }, 'configuration.tools[0].config.sandbox'],
    [{ type: 'mcp', name: 'm', config: { url: 'https://x', allowHosts: ['${vars.h}'] } }, 'configuration.tools[0].config.allowHosts'],
  ])('%j is refused naming %s', (tool, path) => {
    const result = validateRuleChain({ ruleChain: { id: 'x', name: 'x' }, metadata: { nodes: [agentWith([tool as JsonValue])], connections: [] } });
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toContain(`${path} grants authority`);
  });

  it('a flow node\'s targetId is a reference, never a template', () => {
    const result = validateRuleChain({ ruleChain: { id: 'x', name: 'x' }, metadata: { nodes: [{ id: 'f', type: 'flow', configuration: { targetId: '${vars.c}' } }], connections: [] } });
    expect(result.errors.join('\n')).toContain('configuration.targetId grants authority');
  });

  it('fields that grant nothing still take templates', () => {
    const result = validateRuleChain({
      ruleChain: { id: 'x', name: 'x' },
      metadata: { nodes: [agentWith([{ type: 'builtin', name: 'read', description: 'reads ${vars.what}' }]), { id: 'r', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'https://example.com/${metadata.id}' } }], connections: [] },
    });
    expect(result.errors).toEqual([]);
  });
});

/** What the tool answered the run's model (the last tool message it was sent). */
function toolResult(record: { calls: ModelCallRequest[] }): string {
  const messages = record.calls.at(-1)?.messages ?? [];
  return String([...messages].reverse().find((m) => m.role === 'tool')?.content ?? '');
}

describe('references are owned (issue 35, finding 3 and part C)', () => {
  it("an admin's chain that is not shared does not run for a user's agent", async () => {
    canaryHits.length = 0;
    const { record } = await runOf('alice-to-root-internal-private');
    expect(canaryHits).toEqual([]);
    expect(toolResult(record)).toMatch(/chain "root-internal-private" belongs to another user and is not shared with "alice"/);
  });

  it("shared but not lent: the admin's credential and private network do not run for the user", async () => {
    canaryHits.length = 0;
    const { record } = await runOf('alice-to-root-internal-shared');
    expect(canaryHits).toEqual([]);
    expect(toolResult(record)).toMatch(/holds its owner's credentials and does not lend them/);
  });

  it('shared with the user and lent on purpose: it runs with its owner\'s powers (the control)', async () => {
    canaryHits.length = 0;
    await runOf('alice-to-root-internal-lent');
    expect(canaryHits).toEqual(['GET /internal']);
  });

  it("a sub-agent call obeys the called agent's audience for who asked", async () => {
    const refused = await runOf('alice-asks-private');
    expect(toolResult(refused.record)).toMatch(/agent "root-private-helper" is not shared with user:alice/);
    const allowed = await runOf('alice-asks-shared');
    expect(toolResult(allowed.record)).toContain('helper here');
  });
});

describe('a reference that dangled cannot be filled by another user (issue 35, finding 6)', () => {
  it("bob's chain created after alice's agent was saved does not run in alice's run until alice saves again", async () => {
    const refused = await runOf('alice-dangling');
    expect(toolResult(refused.record)).toMatch(/chain "squatted" was created by another user after this definition was saved/);
    // Alice saving again confirms she means this chain (the gateway checks it exists and is shared).
    const row = (await getRuleChain(handle.db, 'alice-dangling'))!;
    await updateRuleChain(handle.db, 'alice-dangling', { name: row.name, category: row.category, dsl: row.dsl });
    const allowed = await runOf('alice-dangling');
    expect(toolResult(allowed.record)).not.toMatch(/refused|not shared|created by another user/);
    expect(toolResult(allowed.record)).toMatch(/"relation"|Success/);
  });
});

describe('sending through a channel account (issue 35, channel sends)', () => {
  const user = { principal: 'channel:chat_d:tg:7', agentOwner: 'alice', owner: 'alice', admin: false };
  const admin = { principal: 'user:alice', agentOwner: 'root', owner: 'root', admin: true };
  const notBound = 'agent "a" may not send through chat_d account "tg": no binding connects them';
  const notAdmitted = 'chat "9" is not in the allow_from of chat_d account "tg"';
  const send = (bindingRefusal: string | null, chatRefusal: string | null, pinned = false) => ({ kind: 'send' as const, bindingRefusal, chatRefusal, pinned });

  it('needs a binding whoever owns the agent, and a chat the account admits', () => {
    expect(refusal(user, send(notBound, null))).toBe(notBound);
    expect(refusal(admin, send(notBound, null, true))).toBe(notBound);
    expect(refusal(user, send(null, notAdmitted))).toBe(notAdmitted);
    expect(refusal(user, send(null, null))).toBeUndefined();
  });

  it("the sender is asked with the run's principal and the definition's powers: a user's pin reaches nothing past allow_from", async () => {
    const outcomes: Array<{ principal: string; admin: boolean; pinned: boolean; refused: string | undefined }> = [];
    const sendMessage: RunDeps['sendMessage'] = async (input) => {
      // What the worker's sender asks, for a bound account that does not admit chat 9.
      const refused = refusal(input.authority, send(null, notAdmitted, input.pinned));
      outcomes.push({ principal: input.authority.principal, admin: input.authority.admin, pinned: input.pinned, refused });
      if (refused !== undefined) throw new Error(refused);
      return { messageId: 'm1' };
    };
    const builtin = { send_message: builtinTools.send_message! };
    await runOf('alice-sender', { sendMessage, builtin });
    await runOf('root-sender', { sendMessage, builtin });
    expect(outcomes).toEqual([
      { principal: 'user:alice', admin: false, pinned: true, refused: notAdmitted },
      { principal: 'user:alice', admin: true, pinned: true, refused: undefined },
    ]);
  });

  it("only an admin's definition reaches past allow_from, and only to a chat its chatIds pin", () => {
    expect(refusal(user, send(null, notAdmitted, true))).toBe(notAdmitted);
    expect(refusal(admin, send(null, notAdmitted, false))).toBe(notAdmitted);
    expect(refusal(admin, send(null, notAdmitted, true))).toBeUndefined();
  });
});
