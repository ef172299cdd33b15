import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModel, startFakeTelegram, waitFor, type FakeModel, type FakePlatform, type FakeReply, type FakeRequest } from '@agentry/testing';
import { authorityFields, builtinToolNames, nodeTypeNames, secretFields } from './authority-matrix.js';

/**
 * The run-time authority matrix (issue 35, "Proof"): every power a definition can hold, read from
 * the schemas (authority-matrix.ts) x how it is written x how the run starts x how it reaches the
 * holder x whose agent names it, shared how x who asks -> allowed or refused, decided by the small rule table `expected` below (not by the engine's
 * policy), and asserted by what actually ran: a canary HTTP server records every request (network
 * and secret powers) and a canary executable on a temporary PATH records every invocation (bash).
 * Both modes run it (authority-matrix.test.ts, authority-matrix-cluster.test.ts) against one
 * server each, many cases per server; every case makes its own definitions (ids `m<n>_...`), so
 * cases cannot disturb each other and a late run of an earlier case is told apart by its id.
 */

const PASSWORDS = { admin: 'admin-pass-word-1', alice: 'alice-pass-word-1', bob: 'bob-pass-word-1', carol: 'carol-pass-word-1' };
export const MATRIX_API_KEY = 'sk-matrix-app-key-0123456789abcdef';
const TOKEN = 'Bearer sealed-admin-token-0123456789';

/** The server a mode starts from these configuration lines; `stop` tears it down. */
export interface MatrixServer {
  baseURL: string;
  stop(): Promise<void>;
}

export function matrixConfigLines(fake: FakeModel): string[] {
  return [
    'models:',
    '  default_provider: fake',
    `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
    `channels: {api: {accounts: {app: {name: App, api_key: "${MATRIX_API_KEY}"}}}}`,
    'worker: {chain_globals: {probe_value: "bash"}}',
    'security:',
    '  requireAuth: true',
    // bash runs unsandboxed here so that the canary executable on a temporary PATH is what runs.
    '  allowUnsandboxedBash: true',
    '  cronMinIntervalSeconds: 1',
    '  quotas: {agentsPerUser: 100000}',
    '  rateLimit: {chat: {requests: 0}}',
    '  users:',
    ...Object.entries(PASSWORDS).map(([u, p]) => `    ${u}: "${p}"`),
  ];
}

// ---------------------------------------------------------------------------------------------
// The powers: one probe per way of holding one, each naming the schema fields it exercises.

type ToolEntry = { type: string; name: string; targetId?: string; config?: Record<string, unknown> };
type DslNode = { id: string; type: string; configuration: Record<string, unknown> };

interface Env {
  canary: string;
  binDir: string;
}

interface Probe {
  name: string;
  /** A tool of an `ai/agent` node (the model is made to call it), or a node of its own. */
  kind: 'tool' | 'node';
  /** Field ids (authority-matrix.ts) this probe holds. */
  covers: string[];
  /** It holds a sealed credential: another owner's definition may not use it unless lent. */
  secrets: boolean;
  build(env: Env, caseId: string): ToolEntry | DslNode;
}

const bash = (extra: Record<string, unknown>) => (env: Env) => ({
  type: 'builtin',
  name: 'bash',
  config: { sandbox: 'none', path: `${env.binDir}:/usr/bin:/bin`, ...extra },
});
const restCall = (extra: Record<string, unknown>) => (env: Env, caseId: string) => ({
  id: 'probe',
  type: 'restApiCall',
  configuration: { restEndpointUrlPattern: `${env.canary}/${caseId}`, requestMethod: 'GET', ...extra },
});
const mcp = (extra: Record<string, unknown>) => (env: Env, caseId: string) => ({ type: 'mcp', name: 'probe_mcp', config: { url: `${env.canary}/${caseId}`, ...extra } });
const fetchTool = (extra: Record<string, unknown>) => () => ({ type: 'builtin', name: 'http_fetch', config: extra });

export const PROBES: readonly Probe[] = [
  { name: 'bash', kind: 'tool', covers: ['node ai/agent tools[].name', 'tool bash sandbox'], secrets: false, build: bash({}) },
  { name: 'bash allowNetwork', kind: 'tool', covers: ['tool bash allowNetwork'], secrets: false, build: bash({ allowNetwork: true }) },
  { name: 'http_fetch allowPrivateNetworks', kind: 'tool', covers: ['tool http_fetch allowPrivateNetworks'], secrets: false, build: fetchTool({ allowPrivateNetworks: true }) },
  { name: 'http_fetch allowHosts', kind: 'tool', covers: ['tool http_fetch allowHosts'], secrets: false, build: fetchTool({ allowHosts: ['127.0.0.1'] }) },
  { name: 'mcp allowPrivateNetworks', kind: 'tool', covers: ['tool mcp allowPrivateNetworks', 'node ai/agent tools[].type'], secrets: false, build: mcp({ allowPrivateNetworks: true }) },
  { name: 'mcp allowHosts', kind: 'tool', covers: ['tool mcp allowHosts'], secrets: false, build: mcp({ allowHosts: ['127.0.0.1'] }) },
  { name: 'mcp sealed header', kind: 'tool', covers: ['tool mcp headers'], secrets: true, build: mcp({ allowPrivateNetworks: true, headers: { Authorization: TOKEN } }) },
  { name: 'restApiCall allowPrivateNetworks', kind: 'node', covers: ['node restApiCall allowPrivateNetworks'], secrets: false, build: restCall({ allowPrivateNetworks: true }) },
  { name: 'restApiCall allowHosts', kind: 'node', covers: ['node restApiCall allowHosts'], secrets: false, build: restCall({ allowHosts: ['127.0.0.1'] }) },
  { name: 'restApiCall sealed header', kind: 'node', covers: ['node restApiCall headers'], secrets: true, build: restCall({ allowPrivateNetworks: true, headers: { Authorization: TOKEN } }) },
];

/** How a run reaches the definition holding the power. */
export type Reach = 'self' | 'fork' | 'chainTool' | 'flow' | 'subagent';
const REACHES: readonly Reach[] = ['self', 'fork', 'chainTool', 'flow', 'subagent'];
/** How the run starts: a chat request, a cron fire, a heartbeat, a message to a bound channel account. */
export type Start = 'chat' | 'cron' | 'heartbeat' | 'channel';
const STARTS: readonly Start[] = ['chat', 'cron', 'heartbeat', 'channel'];
/** The reaches through which one owner's definition uses another's (the reference rules apply). */
const REFERENCES = new Set<Reach>(['chainTool', 'flow', 'subagent']);

/** Marked fields that are not powers held but the reaches themselves (they name what runs). */
export const REACH_FIELDS: Readonly<Record<string, string>> = {
  'node flow targetId': 'reach flow',
  'node ai/agent tools[].targetId': 'reaches chainTool (type rulechain) and subagent (type agent)',
};

/** Node types with no power of their own, and why; the power-holding ones are in PROBES or reaches. */
export const NODES_WITHOUT_POWER: Readonly<Record<string, string>> = {
  'ai/agent': 'holds the tool probes (its tools[] fields are enumerated as marks)',
  'ai/llm': 'calls a configured model provider only (the operator chose it)',
  end: 'ends the chain',
  jsFilter: 'runs script in the isolated JS sandbox: no network, files or processes',
  jsTransform: 'runs script in the isolated JS sandbox: no network, files or processes',
  jsSwitch: 'runs script in the isolated JS sandbox: no network, files or processes',
  log: 'writes to the log',
  flow: 'is the reach "flow"',
  fork: 'is the reach "fork"',
  msgTypeSwitch: 'routes the message',
  join: 'merges branches',
  delay: 'waits (bounded by the run caps)',
  groupFilter: 'routes the message',
  exprFilter: 'evaluates an expression on the message',
  exprTransform: 'evaluates an expression on the message',
  switch: 'routes the message',
  fieldFilter: 'routes the message',
  metadataTransform: 'rewrites the message metadata',
  comment: 'does nothing',
};
export const NODES_WITH_PROBES = new Set(PROBES.filter((p) => p.kind === 'node').map((p) => p.name.split(' ')[0]!));

/** Built-in tools with no power beyond the agent's own workspace and runs, and why. */
export const TOOLS_WITHOUT_POWER: Readonly<Record<string, string>> = {
  read: "the agent's own workspace (workspace rule: e2e/ownership.test.ts)",
  write: "the agent's own workspace (workspace rule and quota: e2e/ownership.test.ts, e2e/quotas.test.ts)",
  edit: "the agent's own workspace",
  grep: "the agent's own workspace",
  glob: "the agent's own workspace",
  skill: "the agent's own and global skills",
  cron: "jobs on the agent itself, with the tool's interval floor and per-agent cap (e2e/cron.test.ts)",
  // A power, asserted elsewhere for now: its recorder is a fake platform, not the canary.
  send_message: 'channel sends: bound account and allow_from, asserted in e2e/channels.test.ts and libs/engine/test (not yet in this matrix)',
};
export const TOOLS_WITH_PROBES = new Set(
  PROBES.filter((p) => p.kind === 'tool')
    .map((p) => p.build({ canary: '', binDir: '' }, '') as ToolEntry)
    .filter((t) => t.type === 'builtin')
    .map((t) => t.name),
);

// ---------------------------------------------------------------------------------------------
// The cases and the rule table.

type Spelling = 'literal' | 'vars' | 'global' | 'metadata';
type Owner = 'admin' | 'alice';
/**
 * Who asks: the entry agent's owner, a user it is shared with, one it is not, an api account in
 * its audience, an admin, or someone writing to a channel account bound to the agent.
 */
type Asker = 'owner' | 'carol' | 'bob' | 'app' | 'admin' | 'peer';
/** How the holder is shared with the entry's owner, when they differ: not, shared, shared and its powers lent. */
type Sharing = 'private' | 'shared' | 'lent';
export type Outcome = 'ran' | 'refused at save' | 'refused at chat' | 'refused at run';

export interface Case {
  id: string;
  probe: Probe;
  start: Start;
  reach: Reach;
  holderOwner: Owner;
  entryOwner: Owner;
  sharing: Sharing;
  asker: Asker;
}

/** Every entry agent's audience: its owner (and admins), carol, and the api account `app`; never bob. */
// A channel peer is not asked about: an account reaches an agent only through an admin's binding.
const IN_AUDIENCE: Readonly<Record<Asker, boolean>> = { owner: true, carol: true, bob: false, app: true, admin: true, peer: true };
/**
 * A holder called as a sub-agent has an audience of its own, narrower than the entry's: carol
 * (and alice when shared with her), no api account. Calling an agent is chatting with it, so the
 * run's principal must be in it too: `app` may chat with the entry but not reach the holder.
 */
const IN_HOLDER_AUDIENCE: Readonly<Record<Asker, boolean>> = { ...IN_AUDIENCE, app: false };

/**
 * THE expectation, as a reader would state the model (docs/reliability.md, "Authority"):
 * - every power in the matrix is admin-only, so a plain user's definition holding one is never saved;
 * - an admin's definition used by its own (or another admin's) agent runs with its powers;
 * - used by a plain user's agent it must be shared with that user (else the save is refused), and
 *   its powers run only when lent; one holding a sealed credential is refused at save unless lent;
 * - whoever asks must be in the entry agent's audience (a cron job's owner, at its creation);
 *   a sub-agent's audience must admit who asks too; beyond that, who asks changes nothing: an
 *   agent's powers are its owner's.
 */
export function expected(c: Case): Outcome {
  if (c.holderOwner !== 'admin') return 'refused at save';
  const crossOwner = REFERENCES.has(c.reach) && c.entryOwner !== 'admin';
  if (crossOwner && c.sharing === 'private') return 'refused at save';
  if (crossOwner && c.sharing === 'shared' && c.probe.secrets) return 'refused at save';
  if (!IN_AUDIENCE[c.asker]) return c.start === 'cron' ? 'refused at save' : 'refused at chat';
  if (c.reach === 'subagent' && !IN_HOLDER_AUDIENCE[c.asker]) return 'refused at run';
  if (crossOwner && c.sharing === 'shared') return 'refused at run';
  return 'ran';
}

/**
 * The cases, pruned where a dimension cannot matter (each prune says why):
 * - a plain user's definition holding a power is refused at save whatever reaches it: one case
 *   per probe (reach self, its owner asking);
 * - `fork` applies to nodes only (a tool is not a branch); a sub-agent call runs the called
 *   agent's `ai/agent` node alone, so it reaches tools, never the nodes before it in its chain;
 * - an admin's entry reaches any admin definition (sharing is not asked of admins): sharing `private` only;
 * - a heartbeat runs as its agent's owner: that asker only; a channel message as its peer: that
 *   asker only (an admin bound the account); a cron job is made on a management
 *   route, which takes a user's JWT, so no api account asks there;
 * - a run started by cron, a heartbeat or a channel differs from a chat in who it is for and how
 *   it begins; past the entry agent the path is the same code, so those starts take the holder
 *   itself and a rule-chain tool (the reference rules: does authority follow the run?) only, with
 *   one probe per recorder and carrier (`BACKGROUND_PROBES`): which power is held is the probe
 *   dimension, already crossed with every path by chat, and each background case waits for a tick.
 */
const BACKGROUND_PROBES = new Set(['bash', 'http_fetch allowPrivateNetworks', 'mcp sealed header', 'restApiCall sealed header']);

export function matrixCases(probes: readonly Probe[] = PROBES): Case[] {
  const out: Case[] = [];
  const add = (c: Omit<Case, 'id'>) => out.push({ ...c, id: `m${out.length}` });
  for (const probe of probes) {
    add({ probe, start: 'chat', reach: 'self', holderOwner: 'alice', entryOwner: 'alice', sharing: 'private', asker: 'owner' });
    for (const start of STARTS) for (const reach of REACHES) {
      if (start !== 'chat' && (!BACKGROUND_PROBES.has(probe.name) || (reach !== 'self' && reach !== 'chainTool'))) continue;
      if (reach === 'fork' && probe.kind !== 'node') continue;
      // A sub-agent call runs the called agent's `ai/agent` node, not the nodes of its chain.
      if (reach === 'subagent' && probe.kind === 'node') continue;
      const entryOwners: Owner[] = REFERENCES.has(reach) ? ['admin', 'alice'] : ['admin'];
      for (const entryOwner of entryOwners) {
        const sharings: Sharing[] = entryOwner === 'admin' ? ['private'] : ['private', 'shared', 'lent'];
        for (const sharing of sharings) {
          const askers: Asker[] =
            start === 'heartbeat' ? ['owner'] : start === 'channel' ? ['peer'] : start === 'cron' ? ['owner', 'carol', 'bob'] : ['owner', 'carol', 'bob', 'app', 'admin'];
          for (const asker of askers) {
            if (asker === 'admin' && entryOwner === 'admin') continue;
            add({ probe, start, reach, holderOwner: 'admin', entryOwner, sharing, asker });
          }
        }
      }
    }
  }
  return out;
}

const describeCase = (c: Case) =>
  `${c.id}: ${c.probe.name} held by ${c.holderOwner}, ${c.start === 'chat' ? '' : `started by ${c.start}, `}reached by ${c.reach}${REFERENCES.has(c.reach) ? ` from ${c.entryOwner}'s agent (${c.sharing})` : ''}, asked by ${c.asker} -> ${expected(c)}`;

// ---------------------------------------------------------------------------------------------
// The suite.

interface Res {
  status: number;
  text: string;
  json: () => unknown;
}

/** Runs the matrix against the server `start` makes from the canary's configuration lines. */
export function authorityMatrix(opts: { start: (configLines: string[]) => Promise<MatrixServer>; probes?: readonly Probe[] }): void {
  let fake: FakeModel;
  let server: MatrixServer;
  let canary: http.Server;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-matrix-'));
  const binDir = path.join(tmp, 'bin');
  const execLog = path.join(tmp, 'exec.log');
  const env: Env = { canary: '', binDir };
  /** Every request the canary saw: its path and Authorization header. */
  const hits: Array<{ url: string; authorization: string | undefined }> = [];
  const tokens: Record<Asker | 'alice', string> = { owner: '', carol: '', bob: '', app: MATRIX_API_KEY, admin: '', alice: '', peer: '' };
  let telegram: FakePlatform;

  async function api(method: string, url: string, token: string, body?: unknown): Promise<Res> {
    const res = await fetch(`${server.baseURL}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  }

  async function fetchRaw(url: string, headers: Record<string, string>, body: string): Promise<Res> {
    const res = await fetch(`${server.baseURL}${url}`, { method: 'POST', headers, body });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  }

  function expectStatus(res: Res, status: number | number[], why: string): void {
    expect(Array.isArray(status) ? status : [status], `${why}: ${res.status} ${res.text}`).toContain(res.status);
  }

  const ranFor = (caseId: string) => {
    const mine = (u: string) => u === `/${caseId}` || u.startsWith(`/${caseId}?`) || u.startsWith(`/${caseId}/`);
    const execs = fs.existsSync(execLog) ? fs.readFileSync(execLog, 'utf8').split('\n') : [];
    return { requests: hits.filter((h) => mine(h.url)), execs: execs.filter((l) => l === caseId) };
  };

  /** The case whose agent made a model call (its system prompt names it). */
  const caseOf = (req: FakeRequest) => /case:(m\d+)/.exec(String(req.body.messages.find((m) => m.role === 'system')?.content ?? ''))?.[1];

  /** Whether a model call of the case's agents was offered a probe tool (a refused one is left out). */
  const offered = (caseId: string) =>
    fake.requests.some(
      (r) =>
        caseOf(r) === caseId &&
        (r.body.tools ?? []).some((t) => ['bash', 'http_fetch'].includes((t as { function?: { name?: string } }).function?.name ?? '')),
    );

  /** Whether the entry agent's model was called back with a tool's result (the reach has run its course). */
  const answered = (caseId: string) =>
    fake.requests.some((r) => caseOf(r) === caseId && r.body.messages.at(-1)?.role === 'tool');

  /**
   * The model of every agent of every case: it reads the case from its system prompt and calls
   * whichever probe or reach tool the agent was given, then repeats the tool's result as its answer.
   */
  function reply(req: FakeRequest): FakeReply {
    const messages = req.body.messages;
    const last = messages[messages.length - 1];
    if (last?.role === 'tool') return { text: String(last.content ?? '') };
    const caseId = caseOf(req) ?? 'none';
    const names = new Set((req.body.tools ?? []).map((t) => (t as { function?: { name?: string } }).function?.name));
    const call = (name: string, args: Record<string, unknown>): FakeReply => ({ toolCalls: [{ name, arguments: JSON.stringify(args) }] });
    if (names.has('probe_agent')) return call('probe_agent', { message: 'go' });
    if (names.has('probe_chain')) return call('probe_chain', { go: true });
    if (names.has('bash')) return call('bash', { command: `agentry-canary ${caseId}` });
    if (names.has('http_fetch')) return call('http_fetch', { url: `${env.canary}/${caseId}` });
    return { text: `nothing to call for ${caseId}` };
  }

  beforeAll(async () => {
    fake = await startFakeModel({ defaultReply: reply });
    telegram = await startFakeTelegram();
    canary = http.createServer((req, res) => {
      hits.push({ url: req.url ?? '', authorization: req.headers.authorization });
      res.end('canary answer');
    });
    await new Promise<void>((resolve) => canary.listen(0, '127.0.0.1', resolve));
    env.canary = `http://127.0.0.1:${(canary.address() as AddressInfo).port}`;
    fs.mkdirSync(binDir);
    fs.writeFileSync(path.join(binDir, 'agentry-canary'), `#!/bin/sh\necho "$1" >> "${execLog}"\n`, { mode: 0o755 });
    server = await opts.start(matrixConfigLines(fake));
    for (const user of ['admin', 'alice', 'bob', 'carol'] as const) {
      const res = await fetch(`${server.baseURL}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: user, password: PASSWORDS[user] }) });
      expect(res.status).toBe(200);
      tokens[user === 'alice' ? 'alice' : user] = ((await res.json()) as { token: string }).token;
    }
  }, 240_000);

  afterAll(async () => {
    await server?.stop();
    await fake?.close();
    await telegram?.close();
    await new Promise((resolve) => canary?.close(resolve));
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const tokenOf = (owner: Owner) => tokens[owner];
  const askerToken = (c: Case) => (c.asker === 'owner' ? tokenOf(c.entryOwner) : tokens[c.asker]);

  const agentNode = (caseId: string, tools?: ToolEntry[], extra: Record<string, unknown> = {}): DslNode => ({
    id: 'agent',
    type: 'ai/agent',
    configuration: { provider: 'fake', systemPrompt: `case:${caseId}`, ...(tools ? { tools } : {}), ...extra },
  });
  const dsl = (id: string, nodes: DslNode[], configuration?: Record<string, unknown>) => ({
    ruleChain: { id, name: id, ...(configuration ? { configuration } : {}) },
    metadata: { nodes, connections: nodes.slice(1).map((n) => ({ fromId: nodes[0]!.id, toId: n.id, type: 'Success' })) },
  });
  const audience = (users: string[], apiAccounts = ['app']) => ({ everyone: false, users, roles: [], apiAccounts });

  /** The holder as an agent (reached by chat, a sub-agent call, cron or heartbeat) or as a chain. */
  function holder(c: Case, as: 'agent' | 'chain', extra: Record<string, unknown> = {}) {
    const id = `${c.id}_h`;
    const built = c.probe.build(env, c.id);
    const lend = c.sharing === 'lent' ? { lendPowers: true } : {};
    if (as === 'chain') {
      const sharing = c.sharing === 'private' ? {} : { shared: true, ...lend };
      return dsl(id, c.probe.kind === 'tool' ? [agentNode(c.id, [built as ToolEntry])] : [built as DslNode], sharing);
    }
    const nodes = c.probe.kind === 'tool' ? [agentNode(c.id, [built as ToolEntry], extra)] : [built as DslNode, agentNode(c.id, undefined, extra)];
    if (c.reach === 'fork') return dsl(id, [{ id: 'fork', type: 'fork', configuration: {} }, ...nodes]);
    return dsl(id, nodes, c.sharing === 'lent' ? lend : undefined);
  }

  /** Saves the case's definitions; answers the id of the agent to chat with, or the refused save. */
  async function save(c: Case): Promise<{ entry: string } | { refused: Res }> {
    const holderOwner = tokenOf(c.holderOwner);
    const entryOwner = tokenOf(c.entryOwner);
    const create = async (url: string, token: string, body: unknown): Promise<Res | undefined> => {
      const res = await api('POST', url, token, body);
      return res.status === 201 ? undefined : res;
    };
    const shareAgent = async (id: string, token: string, users: string[], apiAccounts?: string[]) =>
      expectStatus(await api('PUT', `/agents/${id}/audience`, token, audience(users, apiAccounts)), 200, `audience of ${id}`);
    const heartbeat = c.start === 'heartbeat' ? { heartbeat: { interval: '1s', prompt: 'go' } } : {};
    const bind = async (agentId: string) => {
      if (c.start !== 'channel') return;
      const account = { id: `${c.id}_tg`, name: c.id, dm_policy: 'allow', group_policy: 'disabled', ...telegram.account, binding: { agentId } };
      expectStatus(await api('POST', '/channels/chat_d/accounts', tokens.admin, account), 201, 'channel account');
    };

    if (!REFERENCES.has(c.reach)) {
      const refused = await create('/agents', holderOwner, holder(c, 'agent', heartbeat));
      if (refused) return { refused };
      await shareAgent(`${c.id}_h`, holderOwner, ['carol']);
      await bind(`${c.id}_h`);
      return { entry: `${c.id}_h` };
    }
    if (c.reach === 'subagent') {
      expectStatus(await api('POST', '/agents', holderOwner, holder(c, 'agent')), 201, 'holder agent');
      // Shared: alice and the entry's audience may call it; private: the entry's audience only.
      await shareAgent(`${c.id}_h`, holderOwner, c.sharing === 'private' ? ['carol'] : ['alice', 'carol'], []);
    } else {
      expectStatus(await api('POST', '/rules', holderOwner, holder(c, 'chain')), 201, 'holder chain');
    }
    const target = `${c.id}_h`;
    const entryId = `${c.id}_e`;
    const entry =
      c.reach === 'flow'
        ? dsl(entryId, [{ id: 'flow', type: 'flow', configuration: { targetId: target } }, agentNode(c.id)])
        : dsl(entryId, [
            agentNode(c.id, [{ type: c.reach === 'subagent' ? 'agent' : 'rulechain', name: c.reach === 'subagent' ? 'probe_agent' : 'probe_chain', targetId: target }], heartbeat),
          ]);
    const refused = await create('/agents', entryOwner, entry);
    if (refused) return { refused };
    await shareAgent(entryId, entryOwner, ['carol']);
    await bind(entryId);
    return { entry: entryId };
  }

  async function settle(c: Case, entry: string): Promise<Res> {
    if (c.start !== 'chat') {
      let job: string | undefined;
      let res: Res = { status: 200, text: '', json: () => ({}) };
      if (c.start === 'cron') {
        res = await api('POST', '/cron', askerToken(c), { name: c.id, schedule: '* * * * * *', message: 'go', target: entry });
        if (res.status !== 201) return res;
        job = (res.json() as { id: string }).id;
      }
      if (c.start === 'channel') {
        const { headers, body } = telegram.inbound({ eventId: `${c.id}-1`, chatId: '5150', chatType: 'dm', senderId: '5150', text: 'go' });
        res = await fetchRaw(`/channels/chat_d/accounts/${c.id}_tg/events`, headers, body);
      }
      try {
        // Until the power ran or, when it should not, the entry agent's model had the tool's answer.
        await waitFor(async () => (expected(c) === 'ran' ? ranFor(c.id).requests.length + ranFor(c.id).execs.length > 0 : answered(c.id)), 30_000);
      } finally {
        // Stop the ticks before the next case (a late tick is still this case's by its id).
        if (job) await api('DELETE', `/cron/${job}`, askerToken(c));
        else if (c.start === 'heartbeat') await api('DELETE', `/agents/${entry}`, tokenOf(c.entryOwner));
      }
      return res;
    }
    return api('POST', '/chat/completions', askerToken(c), { model: entry, messages: [{ role: 'user', content: 'go' }] });
  }

  const cases = matrixCases(opts.probes);

  describe('the run-time authority matrix', { timeout: 120_000 }, () => {
    it.concurrent.each(cases.map((c) => [describeCase(c), c] as const))('%s', async (_name, c) => {
      const outcome = expected(c);
      const saved = await save(c);
      if ('refused' in saved) {
        expect(outcome, `the save was refused: ${saved.refused.status} ${saved.refused.text}`).toBe('refused at save');
        expectStatus(saved.refused, 403, 'refused save');
        expect(ranFor(c.id)).toEqual({ requests: [], execs: [] });
        return;
      }
      const res = await settle(c, saved.entry);
      // A fork's other branch may still be running when the answer comes: give what should run its time.
      if (outcome === 'ran') await waitFor(async () => ranFor(c.id).requests.length + ranFor(c.id).execs.length > 0, 30_000).catch(() => undefined);
      const ran = ranFor(c.id);
      switch (outcome) {
        case 'refused at save':
          // Saved, so the refusal must be the cron job's creation (the only save after the definitions).
          expectStatus(res, [403, 404], 'cron job refused');
          expect(ran).toEqual({ requests: [], execs: [] });
          return;
        case 'refused at chat':
          expectStatus(res, [403, 404], 'chat refused');
          expect(ran).toEqual({ requests: [], execs: [] });
          return;
        case 'refused at run':
          // A refused node fails the run (403 naming why); a refused tool is left out of the
          // agent's tools (the model is never offered it) and the run goes on.
          if (c.start === 'chat') expectStatus(res, [200, 403], 'chat answered or refused');
          expect(ran).toEqual({ requests: [], execs: [] });
          if (c.reach === 'subagent' && !IN_HOLDER_AUDIENCE[c.asker]) expect(res.text).toMatch(/is not shared with api:app/);
          else if (res.status === 403 || offered(c.id)) expect(res.text).toMatch(/only an admin's (agent|definition) may/);
          return;
        case 'ran':
          if (c.start === 'chat') expectStatus(res, 200, 'chat answered');
          expect(ran.requests.length + ran.execs.length, `nothing reached the canary; the answer was ${res.text}`).toBeGreaterThan(0);
          if (c.probe.secrets) expect(ran.requests.map((r) => r.authorization)).toContain(TOKEN);
          return;
      }
    });
  });

  describe('templated powers are refused at save for everyone, admins included', { timeout: 60_000 }, () => {
    const spellings: Array<[Exclude<Spelling, 'literal'>, string]> = [
      ['vars', '${vars.probe_value}'],
      ['global', '${global.probe_value}'],
      ['metadata', '${metadata.probe_value}'],
    ];
    const fields = authorityFields().map((f) => f.id);
    it.each(fields.flatMap((field) => spellings.map(([spelling, template]) => [field, spelling, template] as const)))('%s written as ${%s...}', async (field, _spelling, template) => {
      const caseId = `t${fields.indexOf(field)}_${template.slice(2, 5)}`;
      const body = templatedDefinition(field, template, caseId);
      const res = await api('POST', '/agents', tokens.admin, body);
      expectStatus(res, 400, 'templated save');
      expect(res.text).toMatch(/grants authority and may not be a \$\{\.\.\.\} template/);
      expect(ranFor(caseId)).toEqual({ requests: [], execs: [] });
    });
  });

  /** An admin's agent holding the power of `field`, with that field written as `template`. */
  function templatedDefinition(field: string, template: string, caseId: string) {
    const vars = { configuration: { vars: { probe_value: 'bash' } } };
    const parts = field.split(' ');
    const carrier = parts.slice(0, 2).join(' ');
    const fieldPath = parts.slice(2).join(' ');
    const key = fieldPath.replace(/^tools\[\]\./, '');
    const withTemplate = (value: unknown) => (Array.isArray(value) ? [template] : template);
    if (carrier === 'node flow') return { ...dsl(caseId, [{ id: 'flow', type: 'flow', configuration: { targetId: template } }, agentNode(caseId)]), ruleChain: { id: caseId, name: caseId, ...vars } };
    if (carrier === 'node ai/agent') {
      const entry: Record<string, unknown> = { type: 'builtin', name: 'bash', targetId: undefined, config: { sandbox: 'none' } };
      if (key === 'targetId') Object.assign(entry, { type: 'rulechain', name: 'probe_chain', config: undefined });
      entry[key] = template;
      return { ...dsl(caseId, [agentNode(caseId, [JSON.parse(JSON.stringify(entry)) as ToolEntry])]), ruleChain: { id: caseId, name: caseId, ...vars } };
    }
    const probe = PROBES.find((p) => p.covers.includes(field)) ?? PROBES.find((p) => p.covers.some((f) => f.startsWith(`${carrier} `)));
    if (!probe) throw new Error(`no probe holds ${field}: add one to PROBES`);
    const built = probe.build(env, caseId) as ToolEntry & DslNode;
    if (probe.kind === 'node') {
      const node = { ...built, configuration: { ...built.configuration, [key]: withTemplate(built.configuration[key]) } };
      return { ...dsl(caseId, [node, agentNode(caseId)]), ruleChain: { id: caseId, name: caseId, ...vars } };
    }
    const tool = { ...built, config: { ...built.config, [key]: withTemplate(built.config?.[key]) } };
    return { ...dsl(caseId, [agentNode(caseId, [tool])]), ruleChain: { id: caseId, name: caseId, ...vars } };
  }
}

/**
 * The coverage guard: every power the schemas declare has a probe (or is a reach), every node
 * type and built-in tool is either probed or listed with the reason it grants nothing. Adding a
 * power, a node type or a tool without a matrix entry fails here.
 */
export function coverageGuard(): void {
  describe('coverage: the matrix holds every power the schemas declare', () => {
    const covered = new Set([...PROBES.flatMap((p) => p.covers), ...Object.keys(REACH_FIELDS)]);
    it('every x-authority field and every header map has a probe or is a reach', () => {
      const fields = [...authorityFields(), ...secretFields()].map((f) => f.id);
      expect(fields.length).toBeGreaterThan(0);
      expect(fields.filter((f) => !covered.has(f)), 'fields granting a power with no matrix entry').toEqual([]);
      expect([...covered].filter((f) => !fields.includes(f)), 'matrix entries for fields the schemas no longer mark').toEqual([]);
    });

    it('every node type is probed, a reach, or listed with why it grants nothing', () => {
      const types = nodeTypeNames();
      expect(types.filter((t) => !NODES_WITH_PROBES.has(t) && !(t in NODES_WITHOUT_POWER))).toEqual([]);
      expect(Object.keys(NODES_WITHOUT_POWER).filter((t) => !types.includes(t))).toEqual([]);
    });

    it('every built-in tool is probed or listed with why it grants nothing', () => {
      const tools = builtinToolNames();
      expect(tools.filter((t) => !TOOLS_WITH_PROBES.has(t) && !(t in TOOLS_WITHOUT_POWER))).toEqual([]);
      expect(Object.keys(TOOLS_WITHOUT_POWER).filter((t) => !tools.includes(t))).toEqual([]);
    });

    it('every probe and every reach takes part in the generated cases', () => {
      const cases = matrixCases();
      expect(PROBES.filter((p) => !cases.some((c) => c.probe === p))).toEqual([]);
      expect(REACHES.filter((r) => !cases.some((c) => c.reach === r))).toEqual([]);
      expect(STARTS.filter((s) => !cases.some((c) => c.start === s))).toEqual([]);
      // Every outcome of the rule table is reached, so no branch of it is dead.
      expect(new Set(cases.map(expected))).toEqual(new Set<Outcome>(['ran', 'refused at save', 'refused at chat', 'refused at run']));
    });
  });
}
