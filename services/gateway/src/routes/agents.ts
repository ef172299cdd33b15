import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { Id, RuleChainDsl, RuleChainUpdate, cancelRun, chainCategory, defaultWorkspaceFiles } from '@agentry/engine';
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
  updateRuleChain,
  writeWorkspaceFile,
  type JsonValue,
} from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { ownerName } from '../auth/ownership.js';
import { assertValidChain, reloadAnswer, withPathId, type ChainRoutes } from './chain-support.js';
import { PageQuery, pageOf, requireAgent, typed, type Paged } from './common.js';
import { redacted, sealIncoming } from '../definition-secrets.js';

const AgentParams = Type.Object({ agentId: Id });

/**
 * Agents: rule chains with an `ai/agent` node, addressed by their id (the chat `model`). A new
 * agent gets its workspace seeded; deleting one removes everything it owns (ON DELETE CASCADE).
 */
export function agentRoutes(app: FastifyInstance, deps: GatewayDeps, chains: ChainRoutes): void {
  const api = typed(app);
  const db = () => deps.db.db;

  api.get('/agents', { config: { access: 'user' }, schema: { querystring: Type.Object(PageQuery) } }, async (req): Promise<Paged<{ ruleChain: { id: string; name: string } }>> => {
    const { page, size, limit, offset } = pageOf(req.query);
    const [rows, total] = await Promise.all([
      listRuleChains(db(), { kind: 'agent' }, { limit, offset }),
      countRuleChains(db(), { kind: 'agent' }),
    ]);
    return { data: rows.map((r) => ({ ruleChain: { id: r.id, name: r.name } })), total, page, size };
  });

  api.get('/agents/:agentId', { config: { access: 'user' }, schema: { params: AgentParams } }, async (req) => {
    return redacted((await requireAgent(db(), req.params.agentId)).dsl);
  });

  api.post('/agents', { config: { access: 'user' }, schema: { body: RuleChainDsl } }, async (req, reply) => {
    const dsl = sealIncoming(deps, req.body);
    assertValidChain(dsl, true);
    const id = dsl.ruleChain.id;
    const conflict = () => new Errors.CONFLICT(`agent "${id}"`);
    if (await getRuleChain(db(), id)) throw conflict();
    try {
      await inTransaction(db(), async (trx) => {
        await insertRuleChain(trx, {
          id,
          kind: 'agent',
          agentId: null,
          name: dsl.ruleChain.name,
          category: chainCategory(dsl),
          dsl: dsl as JsonValue,
          owner: ownerName(req.principal),
        });
        for (const file of defaultWorkspaceFiles(dsl)) {
          await writeWorkspaceFile(trx, id, file.path, Buffer.from(file.content, 'utf8'), 'create');
        }
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict();
      throw err;
    }
    await chains.changed([id]);
    return reply.status(201).send(redacted(dsl));
  });

  api.put('/agents/:agentId', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentParams, body: RuleChainUpdate } }, async (req) => {
    const { agentId } = req.params;
    const stored = await requireAgent(db(), agentId);
    const dsl = sealIncoming(deps, withPathId(req.body, agentId), stored.dsl);
    assertValidChain(dsl, true);
    const row = await updateRuleChain(db(), agentId, { name: dsl.ruleChain.name, category: chainCategory(dsl), dsl: dsl as JsonValue });
    if (!row) throw new Errors.NOT_FOUND(`agent "${agentId}"`);
    await chains.changed([agentId]);
    return redacted(row.dsl);
  });

  api.delete('/agents/:agentId', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentParams } }, async (req) => {
    const removed = await deleteAgent(deps, req.params.agentId);
    await chains.changed(removed);
    return { success: true };
  });

  api.post('/agents/:agentId/reload', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentParams } }, async (req) => {
    const row = await requireAgent(db(), req.params.agentId);
    return reloadAnswer(await chains.reload(row));
  });
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
