import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Errors } from '@agentry/errors';
import { RuleChainInput, type FieldValidation, type RuleChainDsl, chainCategory, normalizeRuleChain } from '@agentry/definitions';
import {
  deleteRuleChain,
  getRuleChain,
  insertRuleChain,
  isUniqueViolation,
  listRuleChains,
  updateRuleChain,
  type JsonValue,
  type RuleChainFilter,
  type RuleChainRow,
} from '@agentry/db';
import {
  AgentParams,
  AgentRuleListQuery,
  AgentRuleParams,
  ChainWriteQuery,
  ReloadResult,
  RuleChainDocument,
  RuleCreateQuery,
  RuleList,
  RuleListQuery,
  RuleParams,
  SuccessBody,
  type RuleListItem,
} from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import { ownerName } from '../auth/ownership.js';
import { assertAgentUnreferenced, deleteAgent } from './agents.js';
import { assertUnreferenced, checkReferences } from './references.js';
import type { Principal } from '../auth/credentials.js';
import { checkChain, reloadAnswer, sendWarnings, storedChain, withPathId, serializeAsWritten, type ChainRoutes } from './chain-support.js';
import { requireAgent, typed, type TypedReply, type TypedRequest } from './common.js';
import { redacted, sealIncoming } from '../definition-secrets.js';

const ListRules = { querystring: RuleListQuery, response: { 200: RuleList } };
const GetRule = { params: RuleParams, response: { 200: RuleChainDocument } };
const CreateRule = { querystring: RuleCreateQuery, body: RuleChainInput, response: { 201: RuleChainDocument } };
const UpdateRule = { params: RuleParams, querystring: ChainWriteQuery, body: RuleChainInput, response: { 200: RuleChainDocument } };
const DeleteRule = { params: RuleParams, response: { 200: SuccessBody } };
const ReloadRule = { params: RuleParams, response: { 200: ReloadResult } };
const ListAgentRules = { params: AgentParams, querystring: AgentRuleListQuery, response: { 200: RuleList } };
const CreateAgentRule = { params: AgentParams, querystring: RuleCreateQuery, body: RuleChainInput, response: { 201: RuleChainDocument } };
const GetAgentRule = { params: AgentRuleParams, response: { 200: RuleChainDocument } };
const UpdateAgentRule = { params: AgentRuleParams, querystring: ChainWriteQuery, body: RuleChainInput, response: { 200: RuleChainDocument } };
const DeleteAgentRule = { params: AgentRuleParams, response: { 200: SuccessBody } };
const ReloadAgentRule = { params: AgentRuleParams, response: { 200: ReloadResult } };

/** What every handler here works with. */
interface RuleContext {
  deps: GatewayDeps;
  chains: ChainRoutes;
}

/**
 * Rule chains. The global routes see every chain (agents included); the agent-level ones only
 * that agent's rules. Lists are arrays (not paged), ordered by id.
 */
export function ruleRoutes(app: FastifyInstance, deps: GatewayDeps, chains: ChainRoutes): void {
  const api = typed(app);
  const ctx: RuleContext = { deps, chains };
  const owner = { access: 'owner', owns: 'chain' } as const;
  const agentOwner = { access: 'owner', owns: 'agent' } as const;

  // Global routes: every chain.
  api.get('/rules', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: ListRules }, listRules(ctx));
  api.get('/rules/:id', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: GetRule }, getRule(ctx));
  api.post('/rules', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: CreateRule }, createRule(ctx));
  api.put('/rules/:id', { config: owner, serializerCompiler: serializeAsWritten, schema: UpdateRule }, updateRule(ctx));
  api.delete('/rules/:id', { config: owner, schema: DeleteRule }, deleteRule(ctx));
  api.post('/rules/:id/reload', { config: owner, schema: ReloadRule }, reloadRule(ctx));

  // Agent-level routes: only the rules of that agent.
  api.get('/agents/:agentId/rules', { config: agentOwner, serializerCompiler: serializeAsWritten, schema: ListAgentRules }, listAgentRules(ctx));
  api.post('/agents/:agentId/rules', { config: agentOwner, serializerCompiler: serializeAsWritten, schema: CreateAgentRule }, createAgentRule(ctx));
  api.get('/agents/:agentId/rules/:id', { config: agentOwner, serializerCompiler: serializeAsWritten, schema: GetAgentRule }, getAgentRule(ctx));
  api.put('/agents/:agentId/rules/:id', { config: agentOwner, serializerCompiler: serializeAsWritten, schema: UpdateAgentRule }, updateAgentRule(ctx));
  api.delete('/agents/:agentId/rules/:id', { config: agentOwner, schema: DeleteAgentRule }, deleteAgentRule(ctx));
  api.post('/agents/:agentId/rules/:id/reload', { config: agentOwner, schema: ReloadAgentRule }, reloadAgentRule(ctx));
}

function listRules(ctx: RuleContext) {
  return async function listRules(req: TypedRequest<typeof ListRules>) {
    const { agentId, category, loaded } = req.query;
    return list(ctx, { agentId, category }, loaded);
  };
}

function getRule(ctx: RuleContext) {
  return async function getRule(req: TypedRequest<typeof GetRule>) {
    return redacted((await requireChain(ctx, req.params.id)).dsl) as RuleChainDocument;
  };
}

function createRule(ctx: RuleContext) {
  return async function createRule(req: TypedRequest<typeof CreateRule>, reply: TypedReply<typeof CreateRule>) {
    const row = await create(ctx, imported(req.body, req.query.id, reply, true), { agentId: null, owner: ownerName(req.principal), reply, fieldValidation: req.query.fieldValidation });
    return reply.status(201).header('location', `/api/v1/rules/${row.id}`).send(redacted(row.dsl) as RuleChainDocument);
  };
}

function updateRule(ctx: RuleContext) {
  return async function updateRule(req: TypedRequest<typeof UpdateRule>, reply: TypedReply<typeof UpdateRule>) {
    return update(ctx, await requireChain(ctx, req.params.id), imported(req.body, req.params.id, reply, false), { reply, fieldValidation: req.query.fieldValidation });
  };
}

function deleteRule(ctx: RuleContext) {
  return async function deleteRule(req: TypedRequest<typeof DeleteRule>) {
    return remove(ctx, await requireChain(ctx, req.params.id), req.principal);
  };
}

function reloadRule(ctx: RuleContext) {
  return async function reloadRule(req: TypedRequest<typeof ReloadRule>) {
    return reloadAnswer(await ctx.chains.reload(await requireChain(ctx, req.params.id)));
  };
}

function listAgentRules(ctx: RuleContext) {
  return async function listAgentRules(req: TypedRequest<typeof ListAgentRules>) {
    await requireAgent(ctx.deps.db.db, req.params.agentId);
    return list(ctx, { agentId: req.params.agentId, category: req.query.category }, req.query.loaded);
  };
}

function createAgentRule(ctx: RuleContext) {
  return async function createAgentRule(req: TypedRequest<typeof CreateAgentRule>, reply: TypedReply<typeof CreateAgentRule>) {
    const agent = await requireAgent(ctx.deps.db.db, req.params.agentId);
    const row = await create(ctx, imported(req.body, req.query.id, reply, true), { agentId: req.params.agentId, owner: agent.owner, reply, fieldValidation: req.query.fieldValidation });
    return reply.status(201).header('location', `/api/v1/agents/${req.params.agentId}/rules/${row.id}`).send(redacted(row.dsl) as RuleChainDocument);
  };
}

function getAgentRule(ctx: RuleContext) {
  return async function getAgentRule(req: TypedRequest<typeof GetAgentRule>) {
    return redacted((await requireAgentRule(ctx, req.params.agentId, req.params.id)).dsl) as RuleChainDocument;
  };
}

function updateAgentRule(ctx: RuleContext) {
  return async function updateAgentRule(req: TypedRequest<typeof UpdateAgentRule>, reply: TypedReply<typeof UpdateAgentRule>) {
    return update(ctx, await requireAgentRule(ctx, req.params.agentId, req.params.id), imported(req.body, req.params.id, reply, false), { reply, fieldValidation: req.query.fieldValidation });
  };
}

function deleteAgentRule(ctx: RuleContext) {
  return async function deleteAgentRule(req: TypedRequest<typeof DeleteAgentRule>) {
    return remove(ctx, await requireAgentRule(ctx, req.params.agentId, req.params.id), req.principal);
  };
}

function reloadAgentRule(ctx: RuleContext) {
  return async function reloadAgentRule(req: TypedRequest<typeof ReloadAgentRule>) {
    return reloadAnswer(await ctx.chains.reload(await requireAgentRule(ctx, req.params.agentId, req.params.id)));
  };
}

/** The header that tells a client which ids it did not write and what they became. */
export const GENERATED_IDS_HEADER = 'x-agentry-generated-ids';

/**
 * A DSL as written (RuleGo's way: ids missing, nulls for empty maps) made strict: the chain id
 * from `?id=` on a create (it wins, as RuleGo's New(id, dsl)), else the body's, else the path's
 * on a PUT, else a generated `rule-xxxxxxxx`; nodes without an id `node0`, `node1`... The ids
 * chosen are listed in the answer's GENERATED_IDS_HEADER.
 */
function imported(body: RuleChainInput, id: string | undefined, reply: FastifyReply, overrides: boolean): RuleChainDsl {
  const { dsl, generated } = normalizeRuleChain(body, { id, overrides, generate: () => `rule-${randomUUID().slice(0, 8)}` });
  if (generated.length > 0) void reply.header(GENERATED_IDS_HEADER, generated.join('; '));
  return dsl;
}

/** The list items, each admitted to this replica's cache to say whether it loads. */
async function list({ deps, chains }: RuleContext, filter: RuleChainFilter, loaded: boolean | undefined): Promise<RuleListItem[]> {
  const rows = await listRuleChains(deps.db.db, filter);
  const items = rows.map((row): RuleListItem => {
    const result = chains.cache.admit(storedChain(row));
    const dsl = redacted((row.dsl ?? {}) as RuleChainDocument);
    return {
      ruleChain: dsl.ruleChain,
      metadata: dsl.metadata,
      kind: row.kind,
      ...(row.agentId ? { agentId: row.agentId } : {}),
      loaded: result.ok,
      ...(result.ok ? {} : { error: result.error }),
      ...(result.ok && result.warnings ? { warnings: result.warnings } : {}),
    };
  });
  return loaded === undefined ? items : items.filter((i) => i.loaded === loaded);
}

/** How a write was asked for: `?fieldValidation=`, and the answer its warnings go on. */
interface WriteOptions {
  reply: FastifyReply;
  fieldValidation: FieldValidation | undefined;
}

/** `owner`: the creator of a global chain; an agent-level rule belongs to its agent's owner. */
async function create(
  { deps, chains }: RuleContext,
  incoming: RuleChainDsl,
  { agentId, owner, reply, fieldValidation }: WriteOptions & { agentId: string | null; owner: string },
): Promise<RuleChainRow> {
  const body = sealIncoming(deps, incoming);
  const warnings = checkChain(body, false, fieldValidation);
  const id = body.ruleChain.id;
  await checkReferences(deps.db.db, body, owner, id);
  if (await getRuleChain(deps.db.db, id)) throw new Errors.CONFLICT(`rule chain "${id}"`);
  try {
    const row = await insertRuleChain(deps.db.db, { id, kind: 'rule', agentId, name: body.ruleChain.name, category: chainCategory(body), dsl: body as JsonValue, owner });
    await chains.changed([id]);
    sendWarnings(reply, warnings);
    return row;
  } catch (err) {
    if (isUniqueViolation(err)) throw new Errors.CONFLICT(`rule chain "${id}"`);
    throw err;
  }
}

async function update({ deps, chains }: RuleContext, row: RuleChainRow, body: RuleChainDsl, { reply, fieldValidation }: WriteOptions): Promise<RuleChainDocument> {
  const dsl = sealIncoming(deps, withPathId(body, row.id), row.dsl);
  const warnings = checkChain(dsl, row.kind === 'agent', fieldValidation);
  await checkReferences(deps.db.db, dsl, row.owner, row.id);
  const updated = await updateRuleChain(deps.db.db, row.id, { name: dsl.ruleChain.name, category: chainCategory(dsl), dsl: dsl as JsonValue });
  if (!updated) throw new Errors.NOT_FOUND(`rule chain "${row.id}"`);
  await chains.changed([row.id]);
  sendWarnings(reply, warnings);
  return redacted(updated.dsl) as RuleChainDocument;
}

async function remove({ deps, chains }: RuleContext, row: RuleChainRow, p: Principal): Promise<{ success: true }> {
  if (row.kind === 'agent') {
    await assertAgentUnreferenced(deps, p, row.id);
    await chains.changed(await deleteAgent(deps, row.id));
  } else {
    await assertUnreferenced(deps.db.db, p, [row.id], `rule chain "${row.id}"`);
    if (!(await deleteRuleChain(deps.db.db, row.id))) throw new Errors.NOT_FOUND(`rule chain "${row.id}"`);
    await chains.changed([row.id]);
  }
  return { success: true };
}

async function requireChain({ deps }: RuleContext, id: string): Promise<RuleChainRow> {
  const row = await getRuleChain(deps.db.db, id);
  if (!row) throw new Errors.NOT_FOUND(`rule chain "${id}"`);
  return row;
}

async function requireAgentRule({ deps }: RuleContext, agentId: string, id: string): Promise<RuleChainRow> {
  await requireAgent(deps.db.db, agentId);
  const row = await getRuleChain(deps.db.db, id);
  if (!row || row.agentId !== agentId) throw new Errors.NOT_FOUND(`rule chain "${id}" of agent "${agentId}"`);
  return row;
}
