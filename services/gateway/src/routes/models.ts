import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { defaultModelOf } from '@agentry/definitions';
import { deleteProvider, getProvider, insertProvider, isUniqueViolation, listProviders, updateProvider, type ProviderRecord } from '@agentry/db';
import {
  ModelProvider,
  ModelProviderList,
  ModelsOverview,
  ModelsQuickSetupBody,
  ProviderApiKeyBody,
  ProviderCreateBody,
  ProviderParams,
  ProviderTestResult,
  ProviderUpdateBody,
  SuccessBody,
} from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import { seedProviders } from '../providers/seed.js';
import {
  assertProviderFields,
  assertProviderUnused,
  changeProviderRecord,
  createProviderRecord,
  providerView,
  publishProviderChange,
  requireProvider,
} from '../providers/store.js';
import { typed, type TypedReply, type TypedRequest } from './common.js';

/** The id `PUT /config/models` sets up when no default provider exists. */
const QUICK_SETUP_ID = 'default';

const one = { 200: ModelProvider };
const done = { 200: SuccessBody };
const GetOverview = { response: { 200: ModelsOverview } };
const QuickSetup = { body: ModelsQuickSetupBody, response: { 200: ModelsOverview } };
const ListProviders = { response: { 200: ModelProviderList } };
const CreateProvider = { body: ProviderCreateBody, response: { 201: ModelProvider } };
const UpdateProvider = { params: ProviderParams, body: ProviderUpdateBody, response: one };
const SetApiKey = { params: ProviderParams, body: ProviderApiKeyBody, response: done };
const DeleteProvider = { params: ProviderParams, response: done };
const TestProvider = { params: ProviderParams, response: { 200: ProviderTestResult } };
const ReloadProviders = { response: done };

async function overview(deps: GatewayDeps): Promise<ModelsOverview> {
  return { default_provider: deps.config.current.models.default_provider, providers: (await listProviders(deps.db.db)).map(providerView) };
}

function getOverview(deps: GatewayDeps) {
  return (): Promise<ModelsOverview> => overview(deps);
}

/** Sets up the default provider in one call: updates it, or creates `default` when there is none. */
function quickSetup(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof QuickSetup>): Promise<ModelsOverview> => {
    const db = deps.db.db;
    const body = req.body;
    assertProviderFields(body);
    const current = deps.config.current.models.default_provider;
    const existingDefault = current ? await getProvider(db, current) : undefined;
    const id = existingDefault ? current : QUICK_SETUP_ID;
    const apiKeySealed = body.api_key !== undefined ? deps.secrets.seal(body.api_key) : undefined;
    const existing = existingDefault ?? (await getProvider(db, id));
    if (existing) {
      await updateProvider(db, id, {
        ...(body.base_url !== undefined ? { baseUrl: body.base_url } : {}),
        ...(body.model !== undefined ? { model: body.model } : {}),
        ...(apiKeySealed !== undefined ? { apiKeySealed } : {}),
      });
    } else {
      if (body.base_url === undefined) throw new Errors.VALIDATION(`base_url is required to set up model provider "${id}"`);
      try {
        await insertProvider(db, { id, name: id, baseUrl: body.base_url, model: body.model ?? '', models: [], apiKeySealed: apiKeySealed ?? null, fileHmac: null });
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
    return overview(deps);
  };
}

function listAll(deps: GatewayDeps) {
  return async (): Promise<ModelProviderList> => (await listProviders(deps.db.db)).map(providerView);
}

function createProvider(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateProvider>, reply: TypedReply<typeof CreateProvider>): Promise<ModelProvider> => {
    const body = req.body;
    const id = body.id ?? body.name;
    if (id === undefined) throw new Errors.VALIDATION('id: required (or a name usable as id)');
    assertProviderFields(body);
    const { default: makeDefault, ...fields } = body;
    const created = await createProviderRecord(deps, id, fields, makeDefault === true);
    req.log.info({ provider: id }, 'model provider created');
    reply.code(201);
    return providerView(created);
  };
}

function updateOne(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof UpdateProvider>): Promise<ModelProvider> => {
    const id = req.params.name;
    const body = req.body;
    if (body.id !== undefined && body.id !== id) throw new Errors.VALIDATION(`id "${body.id}" does not match the provider in the path ("${id}")`);
    assertProviderFields(body);
    await requireProvider(deps.db.db, id);
    const updated = await changeProviderRecord(deps, id, body);
    req.log.info({ provider: id }, 'model provider updated');
    return providerView(updated);
  };
}

function setApiKey(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof SetApiKey>): Promise<SuccessBody> => {
    const id = req.params.name;
    const updated = await updateProvider(deps.db.db, id, { apiKeySealed: deps.secrets.seal(req.body.apiKey) });
    if (!updated) throw new Errors.NOT_FOUND(`model provider "${id}"`);
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider api key changed');
    return { success: true };
  };
}

function deleteOne(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteProvider>): Promise<SuccessBody> => {
    const id = req.params.name;
    await requireProvider(deps.db.db, id);
    await assertProviderUnused(deps, id);
    if (!(await deleteProvider(deps.db.db, id))) throw new Errors.NOT_FOUND(`model provider "${id}"`);
    await publishProviderChange(deps, id);
    req.log.info({ provider: id }, 'model provider deleted');
    return { success: true };
  };
}

/**
 * Test connection (for the web UI): lists the provider's models, or makes a one-token call when
 * it has no model list. Always 200 with {ok, latencyMs, error?}: a failing provider is an answer.
 */
function testOne(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof TestProvider>): Promise<ProviderTestResult> => {
    const provider = await requireProvider(deps.db.db, req.params.name);
    const apiKey = provider.apiKeySealed ? deps.secrets.open(provider.apiKeySealed) : null;
    const result = await testProvider(provider, apiKey);
    req.log.info({ provider: provider.id, ok: result.ok, latencyMs: result.latencyMs }, 'model provider tested');
    return result;
  };
}

function reloadFromFile(deps: GatewayDeps) {
  return async (): Promise<SuccessBody> => {
    const imported = await seedProviders({ db: deps.db.db, secrets: deps.secrets, config: deps.config.current, logger: deps.logger }, { force: true });
    await publishProviderChange(deps);
    const n = imported.length;
    return {
      success: true,
      message: `${n} model provider${n === 1 ? '' : 's'} re-imported from the configuration file; every replica drops its cached provider clients`,
    };
  };
}

/**
 * Model providers: `/config/models...`. Providers live in Postgres (the file seeds them); the
 * API key is write-only (sealed at rest, shown only as `hasApiKey`). Every change tells every
 * replica to drop its cached provider clients. Admin-only when auth is required (the auth hook
 * guards writes under /config).
 */
export function modelRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const user = { access: 'user' } as const;
  const admin = { access: 'admin' } as const;

  api.get('/config/models', { config: user, schema: GetOverview }, getOverview(deps));
  api.put('/config/models', { config: admin, schema: QuickSetup }, quickSetup(deps));
  api.get('/config/models/providers', { config: user, schema: ListProviders }, listAll(deps));
  api.post('/config/models/providers', { config: admin, schema: CreateProvider }, createProvider(deps));
  api.put('/config/models/providers/:name', { config: admin, schema: UpdateProvider }, updateOne(deps));
  api.put('/config/models/providers/:name/api-key', { config: admin, schema: SetApiKey }, setApiKey(deps));
  api.delete('/config/models/providers/:name', { config: admin, schema: DeleteProvider }, deleteOne(deps));
  api.post('/config/models/providers/:name/test', { config: admin, schema: TestProvider }, testOne(deps));
  api.post('/config/models/reload', { config: admin, schema: ReloadProviders }, reloadFromFile(deps));
}

/** How long a connection test waits for the provider. */
const TEST_TIMEOUT_MS = 10_000;


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
