import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { Id, defaultModelOf } from '@agentry/engine';
import { deleteProvider, getProvider, insertProvider, isUniqueViolation, listProviders, updateProvider, type ProviderModel, type ProviderRecord } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { seedProviders } from '../providers/seed.js';
import {
  assertProviderFields,
  assertProviderUnused,
  providerView,
  publishProviderChange,
  requireProvider,
  type ProviderView,
} from '../providers/store.js';
import { typed } from './common.js';

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

const ModelEntry = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 256 }),
    alias: Type.Optional(Type.String({ maxLength: 256 })),
    context_window: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);

const BaseUrl = Type.String({ pattern: '^https?://', maxLength: 2048, description: 'http(s) URL of the OpenAI-compatible API' });
// Sent as an HTTP header: anything beyond visible ASCII could never reach the provider.
const ApiKey = Type.String({ minLength: 1, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$', description: 'write-only: sealed at rest, never returned; visible ASCII' });

const Fields = {
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  model: Type.Optional(Type.String({ maxLength: 256, description: 'default model name' })),
  models: Type.Optional(Type.Array(ModelEntry, { maxItems: 1000 })),
};

const CreateBody = Type.Object({ id: Type.Optional(Id), base_url: BaseUrl, api_key: Type.Optional(ApiKey), ...Fields }, { additionalProperties: false });
const UpdateBody = Type.Object(
  {
    id: Type.Optional(Type.String()),
    base_url: Type.Optional(BaseUrl),
    // null removes the key.
    api_key: Type.Optional(Type.Union([ApiKey, Type.Null()])),
    ...Fields,
  },
  { additionalProperties: false },
);
const ApiKeyBody = Type.Object({ apiKey: ApiKey }, { additionalProperties: false });
const QuickSetupBody = Type.Object(
  {
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    api_key: Type.Optional(ApiKey),
    base_url: Type.Optional(BaseUrl),
    default: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const NameParams = Type.Object({ name: Id });

/** The id `PUT /config/models` sets up when no default provider exists. */
const QUICK_SETUP_ID = 'default';

/**
 * Model providers: `/config/models...`. Providers live in Postgres (the file seeds them); the
 * API key is write-only (sealed at rest, shown only as `hasApiKey`). Every change tells every
 * replica to drop its cached provider clients. Admin-only when auth is required (the auth hook
 * guards writes under /config).
 */
export function modelRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const db = () => deps.db.db;

  const overview = async (): Promise<{ default_provider: string; providers: ProviderView[] }> => ({
    default_provider: deps.config.current.models.default_provider,
    providers: (await listProviders(db())).map(providerView),
  });

  api.get('/config/models', { config: { access: 'user' } }, overview);

  api.put('/config/models', { config: { access: 'admin' }, schema: { body: QuickSetupBody } }, async (req) => {
    const body = req.body;
    assertProviderFields(body);
    const current = deps.config.current.models.default_provider;
    const existingDefault = current ? await getProvider(db(), current) : undefined;
    const id = existingDefault ? current : QUICK_SETUP_ID;
    const apiKeySealed = body.api_key !== undefined ? deps.secrets.seal(body.api_key) : undefined;
    const existing = existingDefault ?? (await getProvider(db(), id));
    if (existing) {
      await updateProvider(db(), id, {
        ...(body.base_url !== undefined ? { baseUrl: body.base_url } : {}),
        ...(body.model !== undefined ? { model: body.model } : {}),
        ...(apiKeySealed !== undefined ? { apiKeySealed } : {}),
      });
    } else {
      if (body.base_url === undefined) throw new Errors.VALIDATION(`base_url is required to set up model provider "${id}"`);
      try {
        await insertProvider(db(), {
          id,
          name: id,
          baseUrl: body.base_url,
          model: body.model ?? '',
          models: [],
          apiKeySealed: apiKeySealed ?? null,
          fileHmac: null,
        });
      } catch (err) {
        if (isUniqueViolation(err)) throw new Errors.CONFLICT(`model provider "${id}" (created at the same time by another request)`);
        throw err;
      }
    }
    await publishProviderChange(deps, id);
    if (body.default === true || !existingDefault) {
      if (deps.config.current.models.default_provider !== id) await deps.config.update({ models: { default_provider: id } });
    }
    req.log.info({ provider: id }, 'model provider set up');
    return overview();
  });

  api.get('/config/models/providers', { config: { access: 'user' } }, async () => (await listProviders(db())).map(providerView));

  api.post('/config/models/providers', { config: { access: 'admin' }, schema: { body: CreateBody } }, async (req, reply) => {
    const body = req.body;
    const id = body.id ?? body.name;
    if (id === undefined) throw new Errors.VALIDATION('id: required (or a name usable as id)');
    if (!ID_PATTERN.test(id)) throw new Errors.VALIDATION(`id: "${id}" is not an id (letters, digits, _ and -, 1 to 64 characters); give one in "id"`);
    assertProviderFields(body);
    const conflict = () => new Errors.CONFLICT(`model provider "${id}"`);
    if (await getProvider(db(), id)) throw conflict();
    let created;
    try {
      created = await insertProvider(db(), {
        id,
        name: body.name ?? id,
        baseUrl: body.base_url,
        model: body.model ?? '',
        models: normaliseModels(body.models),
        apiKeySealed: body.api_key !== undefined ? deps.secrets.seal(body.api_key) : null,
        fileHmac: null,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict();
      throw err;
    }
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider created');
    return reply.status(201).send(providerView(created));
  });

  api.put('/config/models/providers/:name', { config: { access: 'admin' }, schema: { params: NameParams, body: UpdateBody } }, async (req) => {
    const id = req.params.name;
    const body = req.body;
    if (body.id !== undefined && body.id !== id) throw new Errors.VALIDATION(`id "${body.id}" does not match the provider in the path ("${id}")`);
    assertProviderFields(body);
    await requireProvider(db(), id);
    const updated = await updateProvider(db(), id, {
      ...(body.name !== undefined ? { name: body.name } : {}),
      ...(body.base_url !== undefined ? { baseUrl: body.base_url } : {}),
      ...(body.model !== undefined ? { model: body.model } : {}),
      ...(body.models !== undefined ? { models: normaliseModels(body.models) } : {}),
      ...(body.api_key !== undefined ? { apiKeySealed: body.api_key === null ? null : deps.secrets.seal(body.api_key) } : {}),
    });
    if (!updated) throw new Errors.NOT_FOUND(`model provider "${id}"`);
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider updated');
    return providerView(updated);
  });

  api.put('/config/models/providers/:name/api-key', { config: { access: 'admin' }, schema: { params: NameParams, body: ApiKeyBody } }, async (req) => {
    const id = req.params.name;
    const updated = await updateProvider(db(), id, { apiKeySealed: deps.secrets.seal(req.body.apiKey) });
    if (!updated) throw new Errors.NOT_FOUND(`model provider "${id}"`);
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider api key changed');
    return { success: true };
  });

  api.delete('/config/models/providers/:name', { config: { access: 'admin' }, schema: { params: NameParams } }, async (req) => {
    const id = req.params.name;
    await requireProvider(db(), id);
    await assertProviderUnused(deps, id);
    if (!(await deleteProvider(db(), id))) throw new Errors.NOT_FOUND(`model provider "${id}"`);
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider deleted');
    return { success: true };
  });

  // Test connection (for the web UI): lists the provider's models, or makes a one-token call when
  // it has no model list. Always 200 with {ok, latencyMs, error?}: a failing provider is an answer.
  api.post('/config/models/providers/:name/test', { config: { access: 'admin' }, schema: { params: NameParams } }, async (req) => {
    const provider = await requireProvider(db(), req.params.name);
    const apiKey = provider.apiKeySealed ? deps.secrets.open(provider.apiKeySealed) : null;
    const result = await testProvider(provider, apiKey);
    req.log.info({ provider: provider.id, ok: result.ok, latencyMs: result.latencyMs }, 'model provider tested');
    return result;
  });

  api.post('/config/models/reload', { config: { access: 'admin' } }, async () => {
    const imported = await seedProviders({ db: db(), secrets: deps.secrets, config: deps.config.current, logger: deps.logger }, { force: true });
    await publishProviderChange(deps);
    const n = imported.length;
    return {
      success: true,
      message: `${n} model provider${n === 1 ? '' : 's'} re-imported from the configuration file; every replica drops its cached provider clients`,
    };
  });
}

function normaliseModels(models: ProviderModel[] | undefined): ProviderModel[] {
  return (models ?? []).map((m) => ({
    name: m.name,
    ...(m.alias ? { alias: m.alias } : {}),
    ...(m.context_window !== undefined ? { context_window: m.context_window } : {}),
  }));
}

/** How long a connection test waits for the provider. */
const TEST_TIMEOUT_MS = 10_000;

export interface ProviderTestResult {
  ok: boolean;
  latencyMs: number;
  /** `models`: GET /models answered; `chat`: a one-token chat completion answered. */
  method: 'models' | 'chat';
  /** Model ids the provider listed (first 100), when it lists them. */
  models?: string[];
  error?: string;
}

/**
 * Asks the provider `GET {base_url}/models`; a provider without that route (404, 405, 501) gets a
 * one-token chat completion on its default model instead. The key never appears in the answer:
 * it is cut out of any message the provider sends back.
 */
async function testProvider(p: ProviderRecord, apiKey: string | null): Promise<ProviderTestResult> {
  const base = p.baseUrl.replace(/\/+$/, '');
  const headers = { authorization: `Bearer ${apiKey ?? 'no-key'}`, accept: 'application/json' };
  const started = performance.now();
  const latencyMs = () => Math.round(performance.now() - started);
  const clean = (text: string) => (apiKey ? text.split(apiKey).join('***') : text).slice(0, 500);
  const failure = async (method: ProviderTestResult['method'], what: string, res: Response): Promise<ProviderTestResult> => {
    const text = await res.text().catch(() => '');
    let message = text;
    try {
      const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
      const m = typeof body.error === 'string' ? body.error : (body.error?.message ?? body.message);
      if (typeof m === 'string') message = m;
    } catch {
      // not JSON: the text as it is
    }
    return { ok: false, latencyMs: latencyMs(), method, error: clean(`${what} answered HTTP ${res.status}${message ? `: ${message}` : ''}`) };
  };
  let method: ProviderTestResult['method'] = 'models';
  try {
    const res = await fetch(`${base}/models`, { headers, signal: AbortSignal.timeout(TEST_TIMEOUT_MS) });
    if (res.ok) {
      const body = (await res.json().catch(() => null)) as { data?: Array<{ id?: unknown }> } | null;
      const models = Array.isArray(body?.data) ? body.data.map((m) => m?.id).filter((id): id is string => typeof id === 'string') : [];
      return { ok: true, latencyMs: latencyMs(), method, models: models.slice(0, 100) };
    }
    if (![404, 405, 501].includes(res.status)) return await failure(method, 'GET /models', res);
    await res.body?.cancel();
    method = 'chat';
    const model = defaultModelOf(p);
    if (!model) return { ok: false, latencyMs: latencyMs(), method, error: 'the provider has no GET /models and no default model to try a chat completion with' };
    const chat = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 1, stream: false }),
      signal: AbortSignal.timeout(TEST_TIMEOUT_MS),
    });
    if (!chat.ok) return await failure(method, `POST /chat/completions (model "${model}")`, chat);
    await chat.body?.cancel();
    return { ok: true, latencyMs: latencyMs(), method };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const why = e.name === 'TimeoutError' ? `no answer within ${TEST_TIMEOUT_MS / 1000} s` : (e.cause?.code ?? e.cause?.message ?? e.message);
    return { ok: false, latencyMs: latencyMs(), method, error: clean(`cannot reach ${base}: ${why}`) };
  }
}
