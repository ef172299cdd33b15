import type { FastifyInstance, FastifyRequest } from 'fastify';
import { listUsers } from '@agentry/db';
import { ConfigPatch } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { assertDefaultProviderExists, providerConfigViews } from '../providers/store.js';
import { documentBody } from '../openapi.js';

/** GET/PUT /config: the live configuration, secrets hidden; PUT persists and reaches every replica. */
export function configRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  // Users and model providers live in Postgres (the file only seeds them): list them from there.
  // A `user` sees only its own name: who else has an account is for admins (GET /users).
  const view = async (req: FastifyRequest) => {
    const v = deps.config.view();
    const p = req.principal;
    const own = p.kind === 'user' && p.role !== 'admin' ? p.username : undefined;
    const users = (await listUsers(deps.db.db)).filter((u) => own === undefined || u.username === own);
    v.security.users = Object.fromEntries(users.map((u) => [u.username, true as const]));
    v.models.providers = await providerConfigViews(deps.db.db);
    return v;
  };

  app.get('/config', { config: { access: 'user' } }, view);

  // The patch is checked by LiveConfig.update (its messages name the key), not by fastify: a
  // body schema here would coerce types and word those messages differently.
  app.put('/config', { config: { access: 'admin', swaggerTransform: documentBody(ConfigPatch) } }, async (req) => {
    // The default provider must exist among the database's providers (the file's are seeded there).
    const models = (req.body as { models?: { default_provider?: unknown } } | null)?.models;
    if (models && typeof models === 'object') await assertDefaultProviderExists(deps.db.db, models.default_provider);
    await deps.config.update(req.body);
    return view(req);
  });
}
