import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ConfigDocument } from '@agentry/contracts';
import { listUsers } from '@agentry/db';
import { ConfigPatch } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { assertDefaultProviderExists, providerConfigViews } from '../providers/store.js';
import { documentBody } from '../openapi.js';
import { typed } from './common.js';

const GetConfig = { response: { 200: ConfigDocument } };

/** GET/PUT /config: the live configuration, secrets hidden; PUT persists and reaches every replica. */
export function configRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  api.get('/config', { config: { access: 'user' }, schema: GetConfig }, getConfig(deps));
  // The patch is checked by LiveConfig.update (its messages name the key), not by fastify: a
  // body schema here would coerce types and word those messages differently.
  api.put('/config', { config: { access: 'admin', swaggerTransform: documentBody(ConfigPatch) }, schema: GetConfig }, updateConfig(deps));
}

/**
 * Users and model providers live in Postgres (the file only seeds them): list them from there.
 * A `user` sees only its own name: who else has an account is for admins (GET /users).
 */
async function configView(deps: GatewayDeps, req: FastifyRequest): Promise<ConfigDocument> {
  const v = deps.config.view();
  const p = req.principal;
  const own = p.kind === 'user' && p.role !== 'admin' ? p.username : undefined;
  const users = (await listUsers(deps.db.db)).filter((u) => own === undefined || u.username === own);
  v.security.users = Object.fromEntries(users.map((u) => [u.username, true as const]));
  v.models.providers = await providerConfigViews(deps.db.db);
  return v;
}

function getConfig(deps: GatewayDeps) {
  return async function getConfig(req: FastifyRequest): Promise<ConfigDocument> {
    return configView(deps, req);
  };
}

function updateConfig(deps: GatewayDeps) {
  return async function updateConfig(req: FastifyRequest): Promise<ConfigDocument> {
    // The default provider must exist among the database's providers (the file's are seeded there).
    const models = (req.body as { models?: { default_provider?: unknown } } | null)?.models;
    if (models && typeof models === 'object') await assertDefaultProviderExists(deps.db.db, models.default_provider);
    await deps.config.update(req.body);
    return configView(deps, req);
  };
}
