import type { FastifyInstance, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { Closed, ConfigDocument, ConfigModelsPatch, ProviderCreateFields, ProviderUpdateBody } from '@agentry/contracts';
import { getProvider, listUsers } from '@agentry/db';
import { ConfigPatch, assertConfigPatch, describeErrors } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { assertAllowFromPatch } from '../auth/allow-from.js';
import {
  assertDefaultProviderExists,
  assertProviderFields,
  assertProviderId,
  changeProviderRecord,
  createProviderRecord,
  providerConfigViews,
  type ProviderFields,
} from '../providers/store.js';
import { documentBody } from '../openapi.js';
import { typed } from './common.js';

const GetConfig = { response: { 200: ConfigDocument } };

/** What the OpenAPI document shows of the patch: ConfigPatch, plus the providers this route writes. */
const DocumentedPatch = Type.Object({ ...ConfigPatch.properties, models: Type.Optional(ConfigModelsPatch) }, Closed);

/** GET/PUT /config: the live configuration, secrets hidden; PUT persists and reaches every replica. */
export function configRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  api.get('/config', { config: { access: 'user' }, schema: GetConfig }, getConfig(deps));
  // The patch is checked by LiveConfig.update (its messages name the key), not by fastify: a
  // body schema here would coerce types and word those messages differently.
  api.put('/config', { config: { access: 'admin', swaggerTransform: documentBody(DocumentedPatch) }, schema: GetConfig }, updateConfig(deps));
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

/** Takes `models.providers` out of the patch: providers live in their own table, not in settings. */
function splitPatch(body: unknown): { patch: unknown; providers: unknown } {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return { patch: body, providers: undefined };
  const models = (body as { models?: unknown }).models;
  if (!models || typeof models !== 'object' || Array.isArray(models) || !('providers' in models)) return { patch: body, providers: undefined };
  const { providers, ...rest } = models as Record<string, unknown>;
  return { patch: { ...body, models: rest }, providers };
}

interface ProviderWrite {
  id: string;
  fields: ProviderFields;
  exists: boolean;
}

/**
 * Checks every provider of `models.providers` as the provider routes would (a new one as
 * `POST .../providers`, an existing one as `PUT .../providers/{id}`), all before any is written.
 */
async function checkProviderWrites(deps: GatewayDeps, providers: unknown): Promise<ProviderWrite[]> {
  if (providers === undefined) return [];
  if (!providers || typeof providers !== 'object' || Array.isArray(providers)) throw new Errors.VALIDATION('models.providers: must be an object keyed by provider id');
  const writes: ProviderWrite[] = [];
  for (const [id, entry] of Object.entries(providers)) {
    const at = `models.providers.${id}`;
    const exists = (await getProvider(deps.db.db, id)) !== undefined;
    if (!exists) assertProviderId(id, `name the provider by another key of models.providers`);
    const problems = describeErrors(exists ? ProviderUpdateBody : ProviderCreateFields, entry, at).map((p) =>
      p.startsWith('unknown key ') ? `${p.slice('unknown key '.length)} is not a provider field` : p,
    );
    if (problems.length > 0) throw new Errors.VALIDATION(problems.join('; '));
    const fields = entry as ProviderFields & { id?: string };
    if (fields.id !== undefined && fields.id !== id) throw new Errors.VALIDATION(`${at}.id: "${fields.id}" does not match its key "${id}"`);
    assertProviderFields(fields, `${at}.`);
    writes.push({ id, fields, exists });
  }
  return writes;
}

function updateConfig(deps: GatewayDeps) {
  return async function updateConfig(req: FastifyRequest): Promise<ConfigDocument> {
    const { patch, providers } = splitPatch(req.body);
    assertConfigPatch(patch);
    assertAllowFromPatch(req, patch);
    const writes = await checkProviderWrites(deps, providers);
    // The default provider must exist among the database's providers (the file's are seeded
    // there), or be one this same patch adds.
    const defaultProvider = (patch as { models?: { default_provider?: unknown } }).models?.default_provider;
    if (!writes.some((w) => w.id === defaultProvider)) await assertDefaultProviderExists(deps.db.db, defaultProvider);
    for (const w of writes) {
      if (w.exists) await changeProviderRecord(deps, w.id, w.fields);
      else await createProviderRecord(deps, w.id, { ...w.fields, base_url: w.fields.base_url ?? '' });
      req.log.info({ provider: w.id }, w.exists ? 'model provider updated' : 'model provider created');
    }
    await deps.config.update(patch);
    return configView(deps, req);
  };
}
