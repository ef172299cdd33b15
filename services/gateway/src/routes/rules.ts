import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { Id, RuleChainDsl, RuleChainUpdate, chainCategory } from '@agentry/engine';
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
import type { GatewayDeps } from '../deps.js';
import { ownerName } from '../auth/ownership.js';
import { deleteAgent } from './agents.js';
import { assertValidChain, reloadAnswer, storedChain, withPathId, type ChainRoutes } from './chain-support.js';
import { requireAgent, typed } from './common.js';
import { redacted, sealIncoming } from '../definition-secrets.js';

const RuleParams = Type.Object({ id: Id });
const AgentRuleParams = Type.Object({ agentId: Id, id: Id });
const RuleFilters = {
  category: Type.Optional(Type.String({ maxLength: 200 })),
  /** true: only chains that loaded; false: only chains that failed to load. */
  loaded: Type.Optional(Type.Boolean()),
};

/** A list item: the DSL plus where it belongs and whether this replica's engine loaded it. */
interface RuleListItem {
  ruleChain: unknown;
  metadata: unknown;
  kind: 'agent' | 'rule';
  agentId?: string;
  loaded: boolean;
  error?: string;
}

/**
 * Rule chains. The global routes see every chain (agents included); the agent-level ones only
 * that agent's rules. Lists are arrays (not paged), ordered by id.
 */
export function ruleRoutes(app: FastifyInstance, deps: GatewayDeps, chains: ChainRoutes): void {
  const api = typed(app);
  const db = () => deps.db.db;

  async function list(filter: RuleChainFilter, loaded: boolean | undefined): Promise<RuleListItem[]> {
    const rows = await listRuleChains(db(), filter);
    const items = rows.map((row): RuleListItem => {
      const result = chains.cache.admit(storedChain(row));
      const dsl = redacted((row.dsl ?? {}) as { ruleChain?: unknown; metadata?: unknown });
      return {
        ruleChain: dsl.ruleChain,
        metadata: dsl.metadata,
        kind: row.kind,
        ...(row.agentId ? { agentId: row.agentId } : {}),
        loaded: result.ok,
        ...(result.ok ? {} : { error: result.error }),
      };
    });
    return loaded === undefined ? items : items.filter((i) => i.loaded === loaded);
  }

  /** `owner`: the creator of a global chain; an agent-level rule belongs to its agent's owner. */
  async function create(incoming: RuleChainDsl, agentId: string | null, owner: string): Promise<RuleChainRow> {
    const body = sealIncoming(deps, incoming);
    assertValidChain(body, false);
    const id = body.ruleChain.id;
    if (await getRuleChain(db(), id)) throw new Errors.CONFLICT(`rule chain "${id}"`);
    try {
      const row = await insertRuleChain(db(), { id, kind: 'rule', agentId, name: body.ruleChain.name, category: chainCategory(body), dsl: body as JsonValue, owner });
      await chains.changed([id]);
      return row;
    } catch (err) {
      if (isUniqueViolation(err)) throw new Errors.CONFLICT(`rule chain "${id}"`);
      throw err;
    }
  }

  async function update(row: RuleChainRow, body: RuleChainUpdate): Promise<JsonValue> {
    const dsl = sealIncoming(deps, withPathId(body, row.id), row.dsl);
    assertValidChain(dsl, row.kind === 'agent');
    const updated = await updateRuleChain(db(), row.id, { name: dsl.ruleChain.name, category: chainCategory(dsl), dsl: dsl as JsonValue });
    if (!updated) throw new Errors.NOT_FOUND(`rule chain "${row.id}"`);
    await chains.changed([row.id]);
    return redacted(updated.dsl);
  }

  async function remove(row: RuleChainRow): Promise<{ success: true }> {
    if (row.kind === 'agent') {
      await chains.changed(await deleteAgent(deps, row.id));
    } else {
      if (!(await deleteRuleChain(db(), row.id))) throw new Errors.NOT_FOUND(`rule chain "${row.id}"`);
      await chains.changed([row.id]);
    }
    return { success: true };
  }

  async function requireChain(id: string): Promise<RuleChainRow> {
    const row = await getRuleChain(db(), id);
    if (!row) throw new Errors.NOT_FOUND(`rule chain "${id}"`);
    return row;
  }

  async function requireAgentRule(agentId: string, id: string): Promise<RuleChainRow> {
    await requireAgent(db(), agentId);
    const row = await getRuleChain(db(), id);
    if (!row || row.agentId !== agentId) throw new Errors.NOT_FOUND(`rule chain "${id}" of agent "${agentId}"`);
    return row;
  }

  // Global routes: every chain.
  api.get('/rules', { config: { access: 'user' }, schema: { querystring: Type.Object({ agentId: Type.Optional(Id), ...RuleFilters }) } }, async (req) => {
    const { agentId, category, loaded } = req.query;
    return list({ agentId, category }, loaded);
  });

  api.get('/rules/:id', { config: { access: 'user' }, schema: { params: RuleParams } }, async (req) => redacted((await requireChain(req.params.id)).dsl));

  api.post('/rules', { config: { access: 'user' }, schema: { body: RuleChainDsl } }, async (req, reply) => {
    const row = await create(req.body, null, ownerName(req.principal));
    return reply.status(201).send(redacted(row.dsl));
  });

  api.put('/rules/:id', { config: { access: 'owner', owns: 'chain' }, schema: { params: RuleParams, body: RuleChainUpdate } }, async (req) => {
    return update(await requireChain(req.params.id), req.body);
  });

  api.delete('/rules/:id', { config: { access: 'owner', owns: 'chain' }, schema: { params: RuleParams } }, async (req) => remove(await requireChain(req.params.id)));

  api.post('/rules/:id/reload', { config: { access: 'owner', owns: 'chain' }, schema: { params: RuleParams } }, async (req) => {
    return reloadAnswer(await chains.reload(await requireChain(req.params.id)));
  });

  // Agent-level routes: only the rules of that agent.
  api.get(
    '/agents/:agentId/rules',
    { config: { access: 'user' }, schema: { params: Type.Object({ agentId: Id }), querystring: Type.Object(RuleFilters) } },
    async (req) => {
      await requireAgent(db(), req.params.agentId);
      return list({ agentId: req.params.agentId, category: req.query.category }, req.query.loaded);
    },
  );

  api.post('/agents/:agentId/rules', { config: { access: 'owner', owns: 'agent' }, schema: { params: Type.Object({ agentId: Id }), body: RuleChainDsl } }, async (req, reply) => {
    const agent = await requireAgent(db(), req.params.agentId);
    const row = await create(req.body, req.params.agentId, agent.owner);
    return reply.status(201).send(redacted(row.dsl));
  });

  api.get('/agents/:agentId/rules/:id', { config: { access: 'user' }, schema: { params: AgentRuleParams } }, async (req) => {
    return redacted((await requireAgentRule(req.params.agentId, req.params.id)).dsl);
  });

  api.put('/agents/:agentId/rules/:id', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentRuleParams, body: RuleChainUpdate } }, async (req) => {
    return update(await requireAgentRule(req.params.agentId, req.params.id), req.body);
  });

  api.delete('/agents/:agentId/rules/:id', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentRuleParams } }, async (req) => {
    return remove(await requireAgentRule(req.params.agentId, req.params.id));
  });

  api.post('/agents/:agentId/rules/:id/reload', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentRuleParams } }, async (req) => {
    return reloadAnswer(await chains.reload(await requireAgentRule(req.params.agentId, req.params.id)));
  });
}
