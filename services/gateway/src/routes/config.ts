import type { FastifyInstance } from 'fastify';
import { listUsers } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';

/** GET/PUT /config: the live configuration, secrets hidden; PUT persists and reaches every replica. */
export function configRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  // Users live in Postgres (the file only seeds them): list them from there.
  const view = async () => {
    const v = deps.config.view();
    const users = await listUsers(deps.db.db);
    v.security.users = Object.fromEntries(users.map((u) => [u.username, true as const]));
    return v;
  };

  app.get('/config', view);

  app.put('/config', async (req) => {
    await deps.config.update(req.body);
    return view();
  });
}
