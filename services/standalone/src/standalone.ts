import type { FastifyInstance } from 'fastify';
import type { Runtime } from '@agentry/runtime';
import { startGateway } from '@agentry/gateway';
import { startAgentWorker } from '@agentry/agent-worker';
import { startScheduler } from '@agentry/scheduler';
import { startChannelConnector } from '@agentry/channel-connector';

/**
 * Embedded mode: the four services on one runtime (PGlite and the in-process bus unless
 * DATABASE_URL / REDIS_URL say otherwise). The gateway starts last, so that nothing is
 * accepted before the services behind it run; it closes first for the same reason. With
 * `uiDir` (main.ts passes the built web UI) the gateway serves the UI at `/`.
 */
export async function startStandalone(runtime: Runtime, opts: { uiDir?: string } = {}): Promise<{ app: FastifyInstance; port: number }> {
  await startAgentWorker(runtime);
  await startScheduler(runtime);
  await startChannelConnector(runtime);
  const gateway = await startGateway(runtime, opts);
  runtime.health.markStarted();
  return gateway;
}
