import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';

/** GET/PUT /config: the live configuration, secrets hidden; PUT persists and reaches every replica. */
export function configRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  app.get('/config', async () => deps.config.view());

  app.put('/config', async (req) => {
    await deps.config.update(req.body);
    return deps.config.view();
  });
}
