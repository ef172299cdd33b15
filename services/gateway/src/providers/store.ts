import { Errors } from '@agentry/errors';
import { announceChange, type ModelProvider } from '@agentry/contracts';
import {
  chainsUsingProvider,
  getProvider,
  insertProvider,
  isUniqueViolation,
  listProviders,
  updateProvider,
  type Db,
  type ProviderModel,
  type ProviderRecord,
} from '@agentry/db';
import { defaultModelOf } from '@agentry/definitions';
import type { GatewayDeps } from '../deps.js';

/** A provider as the API shows it: never the key, only whether one is set. */
export function providerView(p: ProviderRecord): ModelProvider {
  return { id: p.id, name: p.name || p.id, base_url: p.baseUrl, model: defaultModelOf(p), models: p.models.map(modelEntry), hasApiKey: p.apiKeySealed !== null };
}

/** The `models.providers.<id>` entry of `GET /config` (the shape it always had). */
export function providerConfigView(p: ProviderRecord): { id: string; name: string; base_url: string; model: string; models: Array<{ name: string; alias?: string }> } {
  return {
    id: p.id,
    name: p.name || p.id,
    base_url: p.baseUrl,
    model: defaultModelOf(p),
    models: p.models.map((m) => (m.alias ? { name: m.name, alias: m.alias } : { name: m.name })),
  };
}

function modelEntry(m: ProviderModel): ProviderModel {
  return {
    name: m.name,
    ...(m.alias ? { alias: m.alias } : {}),
    ...(m.context_window !== undefined ? { context_window: m.context_window } : {}),
  };
}

export async function providerConfigViews(db: Db): Promise<Record<string, ReturnType<typeof providerConfigView>>> {
  return Object.fromEntries((await listProviders(db)).map((p) => [p.id, providerConfigView(p)]));
}

/** The provider row, or 404 naming it. */
export async function requireProvider(db: Db, id: string): Promise<ProviderRecord> {
  const p = await getProvider(db, id);
  if (!p) throw new Errors.NOT_FOUND(`model provider "${id}"`);
  return p;
}

/** A non-empty `models.default_provider` must name a provider in the database: 400 otherwise. */
export async function assertDefaultProviderExists(db: Db, value: unknown): Promise<void> {
  if (typeof value !== 'string' || value === '') return;
  if (!(await getProvider(db, value))) throw new Errors.VALIDATION(`models.default_provider: "${value}" is not one of models.providers`);
}

/**
 * 400 when `base_url` is not an http(s) URL, or two models claim alias `default`. `at` is where
 * the fields sit in the body (`models.providers.p1.`), so the message points at them.
 */
export function assertProviderFields(fields: { base_url?: string; models?: ProviderModel[] }, at = ''): void {
  if (fields.base_url !== undefined) {
    let ok = /^https?:\/\//.test(fields.base_url);
    try {
      ok &&= new URL(fields.base_url).host !== '';
    } catch {
      ok = false;
    }
    if (!ok) throw new Errors.VALIDATION(`${at}base_url: "${fields.base_url}" is not an http(s) URL`);
  }
  if (fields.models && fields.models.filter((m) => m.alias === 'default').length > 1) {
    throw new Errors.VALIDATION(`${at}models: more than one model has alias "default"`);
  }
}

/** 409 when the provider is the default one or a chain names it (as provider or failover). */
export async function assertProviderUnused(deps: GatewayDeps, id: string): Promise<void> {
  if (deps.config.current.models.default_provider === id) {
    throw new Errors.CONFLICT(
      `model provider "${id}" is models.default_provider; make another provider the default (PUT /api/v1/config/models or PUT /api/v1/config) before deleting it`,
    );
  }
  const users = await chainsUsingProvider(deps.db.db, id);
  if (users.length > 0) {
    const names = users.map((u) => `${u.kind === 'agent' ? 'agent' : 'rule chain'} "${u.id}"`).join(', ');
    throw new Errors.CONFLICT(`model provider "${id}" is used by ${names}; change ${users.length > 1 ? 'them' : 'it'} before deleting the provider`);
  }
}

/**
 * Tells every replica (agent-workers included) to drop cached provider rows and clients, after
 * the change committed. A failed publish is logged, not thrown: the write stands, and caches
 * expire on their own within 30 s.
 */
export async function publishProviderChange(deps: Pick<GatewayDeps, 'bus' | 'logger'>, id?: string): Promise<void> {
  await announceChange(deps.bus.pubsub, deps.logger, 'providers', id === undefined ? undefined : [id]);
}

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** 400 unless `id` can name a new provider; `hint` says where the caller may give another. */
export function assertProviderId(id: string, hint = 'give one in "id"'): void {
  if (!ID_PATTERN.test(id)) throw new Errors.VALIDATION(`id: "${id}" is not an id (letters, digits, _ and -, 1 to 64 characters); ${hint}`);
}

/** A provider as written (snake_case, like the file): `api_key` null removes the key. */
export interface ProviderFields {
  name?: string;
  base_url?: string;
  api_key?: string | null;
  model?: string;
  models?: ProviderModel[];
}

function normaliseModels(models: ProviderModel[] | undefined): ProviderModel[] {
  return (models ?? []).map(modelEntry);
}

/**
 * Creates provider `id` (the key sealed), then tells every replica: the one write behind
 * `POST /config/models/providers` and the providers `PUT /config` adds. 409 when the id is taken.
 */
export async function createProviderRecord(deps: GatewayDeps, id: string, fields: ProviderFields & { base_url: string }, makeDefault = false): Promise<ProviderRecord> {
  assertProviderId(id);
  const conflict = () => new Errors.CONFLICT(`model provider "${id}"`);
  if (await getProvider(deps.db.db, id)) throw conflict();
  let created;
  try {
    created = await insertProvider(deps.db.db, {
      id,
      name: fields.name ?? id,
      baseUrl: fields.base_url,
      model: fields.model ?? '',
      models: normaliseModels(fields.models),
      apiKeySealed: typeof fields.api_key === 'string' ? deps.secrets.seal(fields.api_key) : null,
      fileHmac: null,
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict();
    throw err;
  }
  await publishProviderChange(deps, id);
  // A first provider nobody names as the default would leave every agent without a model
  // (issue 42): it becomes the default unless one is set; `makeDefault` forces it.
  const current = deps.config.current.models.default_provider;
  if (makeDefault || !current) {
    if (current !== id) await deps.config.update({ models: { default_provider: id } });
  }
  return created;
}

/**
 * Changes the given fields of provider `id` (a new `base_url` drops the key unless `api_key`
 * comes with it), then tells every replica. 404 when there is no such provider.
 */
export async function changeProviderRecord(deps: GatewayDeps, id: string, fields: ProviderFields): Promise<ProviderRecord> {
  const updated = await updateProvider(deps.db.db, id, {
    ...(fields.name !== undefined ? { name: fields.name } : {}),
    ...(fields.base_url !== undefined ? { baseUrl: fields.base_url } : {}),
    ...(fields.model !== undefined ? { model: fields.model } : {}),
    ...(fields.models !== undefined ? { models: normaliseModels(fields.models) } : {}),
    ...(fields.api_key !== undefined ? { apiKeySealed: fields.api_key === null ? null : deps.secrets.seal(fields.api_key) } : {}),
  });
  if (!updated) throw new Errors.NOT_FOUND(`model provider "${id}"`);
  await publishProviderChange(deps, id);
  return updated;
}
