import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { RuleChainDsl, RuleChainUpdate, chainCategory, defaultWorkspaceFiles, definitionRefusals, ownerIsAdmin } from '@agentry/definitions';
import {
  cancelRun,
  heartbeatOfDsl,
  isAgentDisabled,
  parseHeartbeatTarget,
  syncHeartbeatJob,
} from '@agentry/runs';
import {
  countRuleChains,
  deleteRuleChain,
  getRuleChain,
  inTransaction,
  insertRuleChain,
  isUniqueViolation,
  listActiveRunIdsOfAgent,
  listRuleChainIdsOfAgent,
  listRuleChains,
  setAgentAudience,
  updateRuleChain,
  writeWorkspaceFile,
  type JsonValue,
} from '@agentry/db';
import {
  AgentAudience,
  AgentCreateFields,
  AgentList,
  AgentParams,
  ChainWriteQuery,
  Closed,
  PageQuery,
  ReloadResult,
  RuleChainDocument,
  SuccessBody,
  audienceOf,
} from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from '../auth/credentials.js';
import { mayChange, ownerName } from '../auth/ownership.js';
import { assertAgentQuota } from '../auth/quotas.js';
import { everyoneWarning, newAgentAudience } from '../auth/audience.js';
import { checkChain, reloadAnswer, sendWarnings, withPathId, serializeAsWritten, type ChainRoutes } from './chain-support.js';
import { pageOf, requireAgent, typed, type TypedReply, type TypedRequest } from './common.js';
import { redacted, sealIncoming } from '../definition-secrets.js';
import { checkDeliver } from './cron.js';
import { assertUnreferenced, checkReferences } from './references.js';

const ListAgents = { querystring: PageQuery, response: { 200: AgentList } };
const GetAgent = { params: AgentParams, response: { 200: RuleChainDocument } };
/**
 * `POST /agents` takes the DSL (the definitions' schema), and what the template adds to it; any
 * other unknown field is a 400 naming it.
 */
const NewAgent = Type.Object({ ...RuleChainDsl.properties, ...AgentCreateFields }, Closed);
const CreateAgent = { querystring: ChainWriteQuery, body: NewAgent, response: { 201: RuleChainDocument } };
const UpdateAgent = { params: AgentParams, querystring: ChainWriteQuery, body: RuleChainUpdate, response: { 200: RuleChainDocument } };
const DeleteAgent = { params: AgentParams, response: { 200: SuccessBody } };
const ReloadAgent = { params: AgentParams, response: { 200: ReloadResult } };
const GetAudience = { params: AgentParams, response: { 200: AgentAudience } };
const PutAudience = { params: AgentParams, body: AgentAudience, response: { 200: AgentAudience } };

/**
 * Agents: rule chains with an `ai/agent` node, addressed by their id (the chat `model`). A new
 * agent gets its workspace seeded; deleting one removes everything it owns (ON DELETE CASCADE).
 */
export function agentRoutes(app: FastifyInstance, deps: GatewayDeps, chains: ChainRoutes): void {
  const api = typed(app);
  api.get('/agents', { config: { access: 'user' }, schema: ListAgents }, listAgents(deps));
  api.get('/agents/:agentId', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: GetAgent }, getAgent(deps));
  api.post('/agents', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: CreateAgent }, createAgent(deps, chains));
  api.put('/agents/:agentId', { config: { access: 'owner', owns: 'agent' }, serializerCompiler: serializeAsWritten, schema: UpdateAgent }, updateAgent(deps, chains));
  api.delete('/agents/:agentId', { config: { access: 'owner', owns: 'agent' }, schema: DeleteAgent }, removeAgent(deps, chains));
  api.post('/agents/:agentId/reload', { config: { access: 'owner', owns: 'agent' }, schema: ReloadAgent }, reloadAgent(deps, chains));
  api.get('/agents/:agentId/audience', { config: { access: 'owner', owns: 'agent' }, schema: GetAudience }, getAudience(deps));
  api.put('/agents/:agentId/audience', { config: { access: 'owner', owns: 'agent' }, schema: PutAudience }, putAudience(deps, chains));
}

function getAudience(deps: GatewayDeps) {
  return async function getAudience(req: TypedRequest<typeof GetAudience>): Promise<AgentAudience> {
    return audienceOf((await requireAgent(deps.db.db, req.params.agentId)).audience);
  };
}

/** Replaces who may chat with the agent (its owner and admins always may); warns when everyone may use a dangerous power. */
function putAudience(deps: GatewayDeps, chains: ChainRoutes) {
  return async function putAudience(req: TypedRequest<typeof PutAudience>, reply: TypedReply<typeof PutAudience>): Promise<AgentAudience> {
    const audience = audienceOf(req.body);
    const unique = { everyone: audience.everyone, users: [...new Set(audience.users)], roles: [...new Set(audience.roles)], apiAccounts: [...new Set(audience.apiAccounts)] };
    const row = await setAgentAudience(deps.db.db, req.params.agentId, unique);
    if (!row) throw new Errors.NOT_FOUND(`agent "${req.params.agentId}"`);
    await chains.changed([row.id]);
    warnIfShared(reply, row);
    return unique;
  };
}

type WarningReply = { header(name: string, value: string | string[]): unknown; getHeader(name: string): unknown };

/** The `Warning` header of a save (the spec's answer is the DSL itself, so a body field would change its shape). */
function warnIfShared(reply: WarningReply, row: { id: string; audience: unknown; dsl: unknown }): void {
  const warning = everyoneWarning(row);
  if (warning) addWarnings(reply, [warning]);
}

/** Adds `Warning` headers to those already set (the field-validation ones), not in their place. */
function addWarnings(reply: WarningReply, warnings: readonly string[]): void {
  if (warnings.length === 0) return;
  const prior = reply.getHeader('warning');
  const list = prior === undefined ? [] : Array.isArray(prior) ? prior.map(String) : [String(prior)];
  const all = [...list, ...warnings];
  reply.header('warning', all.length === 1 ? all[0]! : all);
}

/**
 * What the agent's owner may not use, as `Warning` headers: saved by an admin into a user's agent,
 * a power the policy refuses its owner is left out of every run (a step on the run says so too),
 * so the save says it first, in the policy's words. Only the owner and admins save an agent, and
 * the words name only this agent's own configuration.
 */
async function warnOwnerRefusals(deps: GatewayDeps, reply: WarningReply, agent: { id: string; dsl: RuleChainDsl; owner: string }): Promise<void> {
  if (await ownerIsAdmin(deps.db.db, agent.owner)) return;
  const authority = { principal: `user:${agent.owner}`, agentOwner: agent.owner, owner: agent.owner, admin: false };
  const refused = definitionRefusals(agent.dsl, authority, deps.config.current.worker.chain_globals);
  const text = (why: string) => `agent "${agent.id}" is saved, but its owner may not use all of it, and its runs leave that out: ${why}`;
  addWarnings(reply, refused.map((why) => `299 agentry "${text(why).replace(/["\\]/g, '').replace(/[^\x20-\x7e]/g, '?')}"`));
}

function listAgents(deps: GatewayDeps) {
  return async function listAgents(req: TypedRequest<typeof ListAgents>): Promise<AgentList> {
    const { page, size, limit, offset } = pageOf(req.query);
    const [rows, total] = await Promise.all([
      listRuleChains(deps.db.db, { kind: 'agent' }, { limit, offset }),
      countRuleChains(deps.db.db, { kind: 'agent' }),
    ]);
    const mine = (owner: string) => mayChange(req.principal, owner);
    const data = rows.map((r) => ({
      ruleChain: { id: r.id, name: r.name, ...(isAgentDisabled(r.dsl) ? { disabled: true } : {}), owner: r.owner, ...(mine(r.owner) ? { audience: audienceOf(r.audience) } : {}) },
    }));
    return { data, total, page, size };
  };
}

function getAgent(deps: GatewayDeps) {
  return async function getAgent(req: TypedRequest<typeof GetAgent>) {
    return redacted((await requireAgent(deps.db.db, req.params.agentId)).dsl) as RuleChainDocument;
  };
}

function createAgent(deps: GatewayDeps, chains: ChainRoutes) {
  return async function createAgent(req: TypedRequest<typeof CreateAgent>, reply: TypedReply<typeof CreateAgent>) {
    const { workspaceFiles: _seeded, ...body } = req.body;
    const dsl = sealIncoming(deps, body);
    const warnings = checkChain(dsl, true, req.query.fieldValidation);
    const id = dsl.ruleChain.id;
    await checkReferences(deps.db.db, dsl, ownerName(req.principal), id);
    await checkHeartbeatTarget(deps, id, dsl, false);
    await assertAgentQuota(deps.db.db, deps.config.current.security.quotas, req.principal);
    const conflict = () => new Errors.CONFLICT(`agent "${id}"`);
    if (await getRuleChain(deps.db.db, id)) throw conflict();
    try {
      await inTransaction(deps.db.db, async (trx) => {
        await insertRuleChain(trx, {
          id,
          kind: 'agent',
          agentId: null,
          name: dsl.ruleChain.name,
          category: chainCategory(dsl),
          dsl: dsl as JsonValue,
          owner: ownerName(req.principal),
          audience: newAgentAudience(req.principal, deps.config.current.security.requireAuth),
        });
        for (const file of defaultWorkspaceFiles(dsl)) {
          await writeWorkspaceFile(trx, id, file.path, Buffer.from(file.content, 'utf8'), 'create');
        }
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict();
      throw err;
    }
    await syncHeartbeat(deps, { id, dsl, owner: ownerName(req.principal) });
    await chains.changed([id]);
    sendWarnings(reply, warnings);
    warnIfShared(reply, { id, dsl, audience: newAgentAudience(req.principal, deps.config.current.security.requireAuth) });
    return reply.status(201).send(redacted(dsl));
  };
}

function updateAgent(deps: GatewayDeps, chains: ChainRoutes) {
  return async function updateAgent(req: TypedRequest<typeof UpdateAgent>, reply: TypedReply<typeof UpdateAgent>) {
    const { agentId } = req.params;
    const stored = await requireAgent(deps.db.db, agentId);
    const dsl = sealIncoming(deps, withPathId(req.body, agentId), stored.dsl);
    const warnings = checkChain(dsl, true, req.query.fieldValidation);
    await checkReferences(deps.db.db, dsl, stored.owner, agentId);
    await checkHeartbeatTarget(deps, agentId, dsl, true);
    const row = await updateRuleChain(deps.db.db, agentId, { name: dsl.ruleChain.name, category: chainCategory(dsl), dsl: dsl as JsonValue });
    if (!row) throw new Errors.NOT_FOUND(`agent "${agentId}"`);
    await syncHeartbeat(deps, { id: agentId, dsl, owner: row.owner });
    await chains.changed([agentId]);
    sendWarnings(reply, warnings);
    warnIfShared(reply, row);
    await warnOwnerRefusals(deps, reply, { id: agentId, dsl, owner: row.owner });
    return redacted(row.dsl) as RuleChainDocument;
  };
}

/**
 * A heartbeat's target is a cron delivery: the same checks (a messaging platform's account, bound
 * to the agent; a new agent has no bindings yet, so its binding is checked at each beat).
 */
export async function checkHeartbeatTarget(deps: GatewayDeps, agentId: string, dsl: unknown, bound: boolean): Promise<void> {
  const target = heartbeatOfDsl(dsl)?.target;
  await checkDeliver(deps.db.db, parseHeartbeatTarget(target), agentId, bound, 'heartbeat.target');
}

/**
 * The heartbeat job follows the saved DSL. The agent is saved already: a failure here is logged
 * and left to the next save (it is a Redis or database hiccup, not the caller's mistake).
 */
export async function syncHeartbeat(deps: GatewayDeps, agent: { id: string; dsl: unknown; owner?: string }): Promise<void> {
  try {
    await syncHeartbeatJob({ db: deps.db.db, pubsub: deps.bus.pubsub, logger: deps.logger }, agent);
  } catch (err) {
    deps.logger.error({ err, agentId: agent.id }, 'could not bring the heartbeat job in step with the agent');
  }
}

function removeAgent(deps: GatewayDeps, chains: ChainRoutes) {
  return async function removeAgent(req: TypedRequest<typeof DeleteAgent>) {
    await assertAgentUnreferenced(deps, req.principal, req.params.agentId);
    const removed = await deleteAgent(deps, req.params.agentId);
    await chains.changed(removed);
    return { success: true };
  };
}

function reloadAgent(deps: GatewayDeps, chains: ChainRoutes) {
  return async function reloadAgent(req: TypedRequest<typeof ReloadAgent>) {
    const row = await requireAgent(deps.db.db, req.params.agentId);
    return reloadAnswer(await chains.reload(row));
  };
}

/** 409 when other definitions name the agent or one of its rules (they go with it). */
export async function assertAgentUnreferenced(deps: GatewayDeps, p: Principal, agentId: string): Promise<void> {
  await requireAgent(deps.db.db, agentId);
  const ids = [agentId, ...(await listRuleChainIdsOfAgent(deps.db.db, agentId))];
  await assertUnreferenced(deps.db.db, p, ids, `agent "${agentId}"`);
}

/**
 * Deletes an agent and (by cascade) its rules, skills, workspace, sessions and runs; 404 when
 * there is none. Answers the ids of the chains removed, for cache invalidation. The runs still
 * going are cancelled on their workers, which would otherwise go on calling the model for an
 * answer nobody can store; their relays end when they find the row gone.
 */
export async function deleteAgent(deps: GatewayDeps, agentId: string): Promise<string[]> {
  const { removed, runs } = await inTransaction(deps.db.db, async (trx) => {
    await requireAgent(trx, agentId);
    const rules = await listRuleChainIdsOfAgent(trx, agentId);
    const active = await listActiveRunIdsOfAgent(trx, agentId);
    await deleteRuleChain(trx, agentId);
    return { removed: [agentId, ...rules], runs: active };
  });
  // The rows went with the agent: only the announcement reaches anything.
  const outcomes = await Promise.all(runs.map((runId) => cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, runId, 'the agent was deleted')));
  const failed = outcomes.filter((o) => !o.announced).length;
  // Their workers still stop them once the relays end (the listener check); the agent is gone either way.
  if (failed > 0) deps.logger.warn({ agentId, runs: runs.length, failed }, 'could not announce the cancel of every run of a deleted agent');
  return removed;
}
