import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { chainCategory, type HeartbeatConfig } from '@agentry/definitions';
import { heartbeatJobId, heartbeatOfDsl, nextTick } from '@agentry/runs';
import { getCronJob, updateRuleChain, type JsonValue } from '@agentry/db';
import { AgentHeartbeat, AgentParams, HeartbeatSettings, SuccessBody } from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import { assertValidChain, type ChainRoutes } from './chain-support.js';
import { requireAgent, typed, type TypedRequest } from './common.js';
import { checkHeartbeatTarget, syncHeartbeat } from './agents.js';

const HeartbeatView = AgentHeartbeat;
const GetHeartbeat = { params: AgentParams, response: { 200: HeartbeatView } };
const PutHeartbeat = { params: AgentParams, body: HeartbeatSettings, response: { 200: HeartbeatView } };
const DeleteHeartbeat = { params: AgentParams, response: { 200: SuccessBody } };

/**
 * The heartbeat of an agent without sending its whole DSL (the CLI's `agents heartbeat`): it is
 * `configuration.heartbeat` of the agent's `ai/agent` node, so PUT and DELETE are a save of the
 * agent (validated, checked, announced, the heartbeat job brought in step) like PUT /agents/{id}.
 */
export function heartbeatRoutes(app: FastifyInstance, deps: GatewayDeps, chains: ChainRoutes): void {
  const api = typed(app);
  api.get('/agents/:agentId/heartbeat', { config: { access: 'user' }, schema: GetHeartbeat }, getHeartbeat(deps));
  api.put('/agents/:agentId/heartbeat', { config: { access: 'owner', owns: 'agent' }, schema: PutHeartbeat }, putHeartbeat(deps, chains));
  api.delete('/agents/:agentId/heartbeat', { config: { access: 'owner', owns: 'agent' }, schema: DeleteHeartbeat }, deleteHeartbeat(deps, chains));
}

async function view(deps: GatewayDeps, agentId: string, dsl: unknown) {
  const heartbeat = heartbeatOfDsl(dsl) ?? null;
  const job = await getCronJob(deps.db.db, heartbeatJobId(agentId));
  const on = job && !job.disabled;
  const next = on ? nextTick(job.schedule, job.timezone) : null;
  return { heartbeat, cronJobId: job?.id ?? null, schedule: on ? job.schedule : null, nextTickAt: next ? next.toISOString() : null };
}

function getHeartbeat(deps: GatewayDeps) {
  return async function getHeartbeat(req: TypedRequest<typeof GetHeartbeat>) {
    const agent = await requireAgent(deps.db.db, req.params.agentId);
    return view(deps, agent.id, agent.dsl);
  };
}

function putHeartbeat(deps: GatewayDeps, chains: ChainRoutes) {
  return async function putHeartbeat(req: TypedRequest<typeof PutHeartbeat>) {
    const dsl = await saveHeartbeat(deps, chains, req.params.agentId, req.body);
    return view(deps, req.params.agentId, dsl);
  };
}

function deleteHeartbeat(deps: GatewayDeps, chains: ChainRoutes) {
  return async function deleteHeartbeat(req: TypedRequest<typeof DeleteHeartbeat>) {
    await saveHeartbeat(deps, chains, req.params.agentId, undefined);
    return { success: true };
  };
}

type DslNode = { type?: unknown; configuration?: Record<string, unknown> };

/** Writes (or removes) the heartbeat of the agent's first `ai/agent` node and saves the agent. */
async function saveHeartbeat(deps: GatewayDeps, chains: ChainRoutes, agentId: string, heartbeat: HeartbeatConfig | undefined): Promise<unknown> {
  const stored = await requireAgent(deps.db.db, agentId);
  // The stored DSL (secrets sealed as stored): only the heartbeat changes.
  const dsl = structuredClone(stored.dsl) as { metadata?: { nodes?: DslNode[] } };
  const node = dsl.metadata?.nodes?.find((n) => n?.type === 'ai/agent');
  if (!node) throw new Errors.VALIDATION(`agent "${agentId}" has no ai/agent node to hold a heartbeat`);
  const { heartbeat: _old, ...rest } = node.configuration ?? {};
  node.configuration = heartbeat ? { ...rest, heartbeat } : rest;
  // Only the heartbeat changes (the route's schema closes its body); unknown fields the stored
  // DSL keeps were reported when they were saved.
  assertValidChain(dsl, true);
  await checkHeartbeatTarget(deps, agentId, dsl, true);
  const row = await updateRuleChain(deps.db.db, agentId, { name: dsl.ruleChain.name, category: chainCategory(dsl), dsl: dsl as unknown as JsonValue });
  if (!row) throw new Errors.NOT_FOUND(`agent "${agentId}"`);
  await syncHeartbeat(deps, { id: agentId, dsl, owner: row.owner });
  await chains.changed([agentId]);
  return dsl;
}
