import type { FastifyInstance } from 'fastify';
import { PubSubChannels } from '@agentry/contracts';
import { ChainCache } from '@agentry/definitions';
import { getRuleChain } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { agentRoutes } from './agents.js';
import { storedChain, type ChainRoutes } from './chain-support.js';
import { publishChainChanges } from './common.js';
import { heartbeatRoutes } from './heartbeat.js';
import { ruleRoutes } from './rules.js';

/**
 * `/agents...` and `/rules...`. The chain cache is per replica; an `invalidate {area:'agents',
 * id}` message, published after every change, drops the chain from every replica's cache.
 */
export async function chainRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  const cache = new ChainCache(async (id) => {
    const row = await getRuleChain(deps.db.db, id);
    return row && storedChain(row);
  });
  const unsubscribe = await deps.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => {
    if (m.area !== 'agents') return;
    if (m.id) cache.invalidate(m.id);
    else cache.clear();
  });
  app.addHook('onClose', async () => {
    await unsubscribe().catch(() => undefined);
  });

  const ctx: ChainRoutes = {
    cache,
    changed: async (ids) => {
      for (const id of ids) cache.invalidate(id);
      await publishChainChanges(deps, ids);
    },
    reload: async (row) => {
      cache.invalidate(row.id);
      await publishChainChanges(deps, [row.id]);
      return cache.admit(storedChain(row));
    },
  };
  agentRoutes(app, deps, ctx);
  heartbeatRoutes(app, deps, ctx);
  ruleRoutes(app, deps, ctx);
}
