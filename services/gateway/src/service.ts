import type { FastifyInstance } from 'fastify';
import type { Runtime } from '@agentry/runtime';
import { buildGateway, type GatewayOptions } from './app.js';
import { seedGateway } from './seed.js';

/** Seeds the configuration's data, builds the gateway on a runtime and listens on the configured address. */
export async function startGateway(runtime: Runtime, opts: GatewayOptions = {}): Promise<{ app: FastifyInstance; port: number }> {
  await seedGateway(runtime);
  const app = await buildGateway(runtime, opts);
  const { host, port } = runtime.config.current.server;
  await app.listen({ host, port });
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address ? address.port : port;
  runtime.lifecycle.add('http', async () => {
    runtime.health.markStopping();
    await app.close();
  });
  runtime.logger.info({ host, port: boundPort, url: `http://${host === '0.0.0.0' ? 'localhost' : host}:${boundPort}` }, 'gateway listening');
  return { app, port: boundPort };
}
