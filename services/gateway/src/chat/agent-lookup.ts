import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { getRuleChain, type RuleChainRow } from '@agentry/db';
import { AgentCache, assertAgentEnabled } from '@agentry/runs';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from '../auth/credentials.js';
import { assertMayChat } from '../auth/audience.js';

/** The agent a chat or a response names, if `principal` may chat with it, or the error its caller gets. */
export type RequireAgent = (agentId: string, principal: Principal) => Promise<RuleChainRow>;

/**
 * Agent rows for an OpenAI endpoint (chat completions, the Responses API), kept until
 * `invalidate {area:'agents', id}` (or 5 s). Until the subscription is in place every request
 * reads the row, so no invalidation can be missed. An unknown agent is 404, a disabled one 403,
 * one not shared with the caller (or outside an api account's bindings) 403.
 */
export function agentLookup(app: FastifyInstance, deps: GatewayDeps, endpoint: string): RequireAgent {
  const agents = new AgentCache(deps.db.db, { load: (id) => getRuleChain(deps.db.db, id) });
  let following = false;
  const follow = agents.follow(deps.bus.pubsub).then(
    (unsubscribe) => {
      following = true;
      return unsubscribe;
    },
    (err: unknown) => {
      deps.logger.warn({ err }, `${endpoint}: no agent invalidations; agents are read on every request`);
      return undefined;
    },
  );
  app.addHook('onClose', async () => {
    following = false;
    await (await follow)?.().catch(() => undefined);
  });
  return async (agentId, principal) => {
    const row = following ? await agents.get(agentId) : await getRuleChain(deps.db.db, agentId);
    if (!row || row.kind !== 'agent') throw new Errors.NOT_FOUND(`agent "${agentId}"`);
    assertAgentEnabled(row);
    assertMayChat(principal, row);
    return row;
  };
}
