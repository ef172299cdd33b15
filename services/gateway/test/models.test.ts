import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { getProvider, type DbHandle } from '@agentry/db';
import { createTestDatabase, createTestPglite, describeWithPostgres, type TestDatabase } from '@agentry/testing';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/** Model providers: `/config/models...`, `GET/PUT /config`, and seeding from the file. */

const FILE_KEY = 'sk-file-provider-secret-0001';
const API_KEY_1 = 'sk-api-provider-secret-0002';
const API_KEY_2 = 'sk-api-provider-secret-0003';
const QUICK_KEY = 'sk-quick-setup-secret-0004';
const PATCH_KEY = 'sk-config-patch-secret-0005';
const SECRETS = [FILE_KEY, API_KEY_1, API_KEY_2, QUICK_KEY, PATCH_KEY];

const CONFIG = `
models:
  default_provider: p1
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: "${FILE_KEY}", models: [{name: m1}, {name: m2, alias: default, context_window: 8192}]}
    p2: {base_url: "https://example.invalid/v1", model: big}
`;

function agentDsl(id: string, configuration: Record<string, unknown>) {
  return {
    ruleChain: { id, name: `Agent ${id}` },
    metadata: {
      nodes: [
        { id: 'node_agent', type: 'ai/agent', configuration: { systemPrompt: 'Be brief.', ...configuration } },
        { id: 'node_end', type: 'end' },
      ],
      connections: [{ fromId: 'node_agent', toId: 'node_end', type: 'Success' }],
    },
  };
}

interface Env {
  h: Harness;
  /** Every response body so far (checked for secrets at the end). */
  bodies: string[];
  invalidations: InvalidateMessage[];
  req(method: InjectOptions['method'], url: string, payload?: unknown): Promise<LightMyRequestResponse>;
}

function restSuite(openDb: () => Promise<{ db?: DbHandle; cleanup(): Promise<void> }>) {
  let env: Env;
  let cleanup: () => Promise<void> = async () => {};
  beforeAll(async () => {
    const opened = await openDb();
    cleanup = opened.cleanup;
    const h = await startHarness(CONFIG, opened.db ? { db: opened.db } : {});
    const bodies: string[] = [];
    const invalidations: InvalidateMessage[] = [];
    await h.runtime.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => {
      if (m.area === 'providers') invalidations.push(m);
    });
    env = {
      h,
      bodies,
      invalidations,
      req: async (method, url, payload) => {
        const res = await h.app.inject({ method, url, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
        bodies.push(res.body);
        return res;
      },
    };
  });
  afterAll(async () => {
    if (env) {
      const seen = [...env.bodies, ...env.h.logs].join('\n');
      for (const secret of SECRETS) expect(seen).not.toContain(secret);
      await env.h.close();
    }
    await cleanup();
  });

  const waitForInvalidation = async (id: string | undefined) => {
    for (let i = 0; i < 100; i++) {
      if (env.invalidations.some((m) => m.id === id)) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no invalidation for ${id ?? 'all providers'}`);
  };

  it('seeds the file providers: GET /config/models/providers and /config/models, never the key', async () => {
    const list = await env.req('GET', '/api/v1/config/models/providers');
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual([
      {
        id: 'p1',
        name: 'One',
        base_url: 'http://127.0.0.1:1/v1',
        model: 'm2',
        models: [{ name: 'm1' }, { name: 'm2', alias: 'default', context_window: 8192 }],
        hasApiKey: true,
      },
      { id: 'p2', name: 'p2', base_url: 'https://example.invalid/v1', model: 'big', models: [], hasApiKey: false },
    ]);
    const overview = await env.req('GET', '/api/v1/config/models');
    expect(overview.json()).toEqual({ default_provider: 'p1', providers: list.json() });
    const row = await getProvider(env.h.runtime.db.db, 'p1');
    expect(row?.apiKeySealed).toMatch(/^v1\./);
    expect(row?.apiKeySealed).not.toContain(FILE_KEY);
    expect(env.h.runtime.secrets.open(row!.apiKeySealed!)).toBe(FILE_KEY);
  });

  it('POST creates a provider (201, as read), seals its key and tells every replica', async () => {
    const res = await env.req('POST', '/api/v1/config/models/providers', {
      id: 'p3',
      name: 'Three',
      base_url: 'https://three.example/v1',
      api_key: API_KEY_1,
      models: [{ name: 'fast-1', alias: 'default' }],
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({
      id: 'p3',
      name: 'Three',
      base_url: 'https://three.example/v1',
      model: 'fast-1',
      models: [{ name: 'fast-1', alias: 'default' }],
      hasApiKey: true,
    });
    const row = await getProvider(env.h.runtime.db.db, 'p3');
    expect(row?.apiKeySealed).not.toContain(API_KEY_1);
    expect(env.h.runtime.secrets.open(row!.apiKeySealed!)).toBe(API_KEY_1);
    expect(row?.fileHmac).toBeNull();
    await waitForInvalidation('p3');

    const byName = await env.req('POST', '/api/v1/config/models/providers', { name: 'local_llm', base_url: 'http://localhost:11434/v1', model: 'llama' });
    expect(byName.statusCode).toBe(201);
    expect(byName.json()).toMatchObject({ id: 'local_llm', name: 'local_llm', model: 'llama', hasApiKey: false });
  });

  it.each([
    [{ id: 'p1', base_url: 'http://x.example/v1' }, 409, 'Already exists: model provider "p1"'],
    [{ id: 'bad', base_url: 'ftp://x.example' }, 400, 'Invalid input: body.base_url: must match pattern "^https?://"'],
    [{ id: 'bad', base_url: 'http://' }, 400, 'Invalid input: base_url: "http://" is not an http(s) URL'],
    [{ id: 'bad' }, 400, "Invalid input: body: must have required property 'base_url'"],
    [{ name: 'My Provider', base_url: 'http://x.example/v1' }, 400, 'Invalid input: id: "My Provider" is not an id (letters, digits, _ and -, 1 to 64 characters); give one in "id"'],
    [{ base_url: 'http://x.example/v1' }, 400, 'Invalid input: id: required (or a name usable as id)'],
    [
      { id: 'bad', base_url: 'http://x.example/v1', models: [{ name: 'a', alias: 'default' }, { name: 'b', alias: 'default' }] },
      400,
      'Invalid input: models: more than one model has alias "default"',
    ],
  ])('POST %j -> %i', async (body, status, error) => {
    const res = await env.req('POST', '/api/v1/config/models/providers', body);
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({ error });
    expect(await getProvider(env.h.runtime.db.db, 'bad')).toBeUndefined();
  });

  it('PUT changes the given fields only; PUT .../api-key replaces the key', async () => {
    const res = await env.req('PUT', '/api/v1/config/models/providers/p3', { name: 'Three (renamed)', model: 'fast-2' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id: 'p3',
      name: 'Three (renamed)',
      base_url: 'https://three.example/v1',
      model: 'fast-2',
      models: [{ name: 'fast-1', alias: 'default' }],
      hasApiKey: true,
    });
    const key = await env.req('PUT', '/api/v1/config/models/providers/p3/api-key', { apiKey: API_KEY_2 });
    expect(key.statusCode).toBe(200);
    expect(key.json()).toEqual({ success: true });
    const row = await getProvider(env.h.runtime.db.db, 'p3');
    expect(env.h.runtime.secrets.open(row!.apiKeySealed!)).toBe(API_KEY_2);

    const cleared = await env.req('PUT', '/api/v1/config/models/providers/local_llm', { api_key: null, base_url: 'http://127.0.0.1:11434/v1' });
    expect(cleared.json()).toMatchObject({ base_url: 'http://127.0.0.1:11434/v1', hasApiKey: false });
  });

  it('a new base_url clears the stored key unless the same request brings one: the key never reaches the new host', async () => {
    const heard: Array<string | undefined> = [];
    const listener = http.createServer((req, res) => {
      heard.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m"}]}');
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/v1`;
    try {
      await env.req('POST', '/api/v1/config/models/providers', { id: 'moved', base_url: 'https://moved.example/v1', api_key: API_KEY_1 });
      // Fields other than base_url, and base_url unchanged, keep the key.
      const same = await env.req('PUT', '/api/v1/config/models/providers/moved', { base_url: 'https://moved.example/v1', name: 'Moved' });
      expect(same.json()).toMatchObject({ name: 'Moved', hasApiKey: true });

      const moved = await env.req('PUT', '/api/v1/config/models/providers/moved', { base_url: elsewhere });
      expect(moved.json()).toMatchObject({ base_url: elsewhere, hasApiKey: false });
      expect((await getProvider(env.h.runtime.db.db, 'moved'))?.apiKeySealed).toBeNull();
      const test = await env.req('POST', '/api/v1/config/models/providers/moved/test');
      expect(test.json()).toMatchObject({ ok: true });
      expect(heard).toEqual(['Bearer no-key']);

      // A key sent with the new base_url is meant for it.
      const rekeyed = await env.req('PUT', '/api/v1/config/models/providers/moved', { base_url: 'https://third.example/v1', api_key: API_KEY_2 });
      expect(rekeyed.json()).toMatchObject({ hasApiKey: true });
      expect(env.h.runtime.secrets.open((await getProvider(env.h.runtime.db.db, 'moved'))!.apiKeySealed!)).toBe(API_KEY_2);
    } finally {
      await env.req('DELETE', '/api/v1/config/models/providers/moved');
      await new Promise((resolve) => listener.close(resolve));
    }
  });

  it.each([
    ['PUT', '/api/v1/config/models/providers/ghost', { name: 'x' }, 404, 'Not found: model provider "ghost"'],
    ['PUT', '/api/v1/config/models/providers/ghost/api-key', { apiKey: 'k' }, 404, 'Not found: model provider "ghost"'],
    ['DELETE', '/api/v1/config/models/providers/ghost', undefined, 404, 'Not found: model provider "ghost"'],
    ['PUT', '/api/v1/config/models/providers/p3', { base_url: 'file:///etc/passwd' }, 400, 'Invalid input: body.base_url: must match pattern "^https?://"'],
    ['PUT', '/api/v1/config/models/providers/p3', { id: 'p4' }, 400, 'Invalid input: id "p4" does not match the provider in the path ("p3")'],
    ['PUT', '/api/v1/config/models/providers/p3/api-key', {}, 400, "Invalid input: body: must have required property 'apiKey'"],
    ['PUT', '/api/v1/config/models/providers/p3/api-key', { apiKey: '' }, 400, 'Invalid input: body.apiKey: must NOT have fewer than 1 characters'],
  ] as const)('%s %s %j -> %i', async (method, url, body, status, error) => {
    const res = await env.req(method, url, body);
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({ error });
  });

  it('DELETE refuses the default provider and providers that agents use (409 naming them), then deletes', async () => {
    const isDefault = await env.req('DELETE', '/api/v1/config/models/providers/p1');
    expect(isDefault.statusCode).toBe(409);
    expect(isDefault.json().error).toBe(
      'Already exists: model provider "p1" is models.default_provider; make another provider the default (PUT /api/v1/config/models or PUT /api/v1/config) before deleting it',
    );

    expect((await env.req('POST', '/api/v1/agents', agentDsl('uses_p3', { provider: 'p3' }))).statusCode).toBe(201);
    expect((await env.req('POST', '/api/v1/agents', agentDsl('falls_to_p3', { provider: 'p1', failover: [{ provider: 'p3' }] }))).statusCode).toBe(201);
    const used = await env.req('DELETE', '/api/v1/config/models/providers/p3');
    expect(used.statusCode).toBe(409);
    expect(used.json().error).toBe(
      'Already exists: model provider "p3" is used by agent "falls_to_p3", agent "uses_p3"; change them before deleting the provider',
    );
    expect(await getProvider(env.h.runtime.db.db, 'p3')).toBeDefined();

    expect((await env.req('DELETE', '/api/v1/agents/uses_p3')).statusCode).toBe(200);
    expect((await env.req('DELETE', '/api/v1/agents/falls_to_p3')).statusCode).toBe(200);
    const gone = await env.req('DELETE', '/api/v1/config/models/providers/p3');
    expect(gone.statusCode).toBe(200);
    expect(gone.json()).toEqual({ success: true });
    expect(await getProvider(env.h.runtime.db.db, 'p3')).toBeUndefined();
    await waitForInvalidation('p3');
  });

  it('GET /config lists the providers of the database; PUT /config checks default_provider against them', async () => {
    const view = (await env.req('GET', '/api/v1/config')).json();
    expect(Object.keys(view.models.providers)).toEqual(['local_llm', 'p1', 'p2']);
    expect(view.models.providers.local_llm).toEqual({ id: 'local_llm', name: 'local_llm', base_url: 'http://127.0.0.1:11434/v1', model: 'llama', models: [] });
    expect(view.models.providers.p1).toEqual({ id: 'p1', name: 'One', base_url: 'http://127.0.0.1:1/v1', model: 'm2', models: [{ name: 'm1' }, { name: 'm2', alias: 'default' }] });

    const unknown = await env.req('PUT', '/api/v1/config', { models: { default_provider: 'p3' } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ error: 'Invalid input: models.default_provider: "p3" is not one of models.providers' });

    // A provider made through the API can be the default.
    const ok = await env.req('PUT', '/api/v1/config', { models: { default_provider: 'local_llm' } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().models.default_provider).toBe('local_llm');
  });

  it('PUT /config/models sets up the default provider in one call', async () => {
    // A default exists (local_llm): it is the one changed.
    const res = await env.req('PUT', '/api/v1/config/models', { base_url: 'http://127.0.0.1:8000/v1', model: 'qwen', api_key: QUICK_KEY });
    expect(res.statusCode).toBe(200);
    expect(res.json().default_provider).toBe('local_llm');
    expect(res.json().providers.find((p: { id: string }) => p.id === 'local_llm')).toEqual({
      id: 'local_llm',
      name: 'local_llm',
      base_url: 'http://127.0.0.1:8000/v1',
      model: 'qwen',
      models: [],
      hasApiKey: true,
    });

    // No default: provider "default" is created and becomes the default.
    expect((await env.req('PUT', '/api/v1/config', { models: { default_provider: '' } })).statusCode).toBe(200);
    const missing = await env.req('PUT', '/api/v1/config/models', { model: 'gpt-x' });
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toEqual({ error: 'Invalid input: base_url is required to set up model provider "default"' });
    const created = await env.req('PUT', '/api/v1/config/models', { base_url: 'https://api.example.com/v1', model: 'gpt-x', api_key: QUICK_KEY, default: true });
    expect(created.statusCode).toBe(200);
    expect(created.json().default_provider).toBe('default');
    expect(created.json().providers.find((p: { id: string }) => p.id === 'default')).toEqual({
      id: 'default',
      name: 'default',
      base_url: 'https://api.example.com/v1',
      model: 'gpt-x',
      models: [],
      hasApiKey: true,
    });
    expect((await env.req('GET', '/api/v1/config')).json().models.default_provider).toBe('default');
    // Moving the default provider elsewhere without a key leaves it without one.
    const moved = await env.req('PUT', '/api/v1/config/models', { base_url: 'https://elsewhere.example/v1' });
    expect(moved.json().providers.find((p: { id: string }) => p.id === 'default')).toMatchObject({ base_url: 'https://elsewhere.example/v1', hasApiKey: false });
    expect((await env.req('PUT', '/api/v1/config/models', { base_url: 'gopher://x' })).statusCode).toBe(400);
  });

  it('POST /config/models/reload re-imports the file providers (API changes to them undone, API providers kept)', async () => {
    expect((await env.req('PUT', '/api/v1/config/models/providers/p1', { name: 'Changed', base_url: 'http://10.0.0.1/v1' })).statusCode).toBe(200);
    env.invalidations.length = 0;
    const res = await env.req('POST', '/api/v1/config/models/reload');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      success: true,
      message: '2 model providers re-imported from the configuration file; every replica drops its cached provider clients',
    });
    await waitForInvalidation(undefined);
    const list = (await env.req('GET', '/api/v1/config/models/providers')).json() as Array<{ id: string; name: string; base_url: string }>;
    expect(list.map((p) => p.id)).toEqual(['default', 'local_llm', 'p1', 'p2']);
    expect(list.find((p) => p.id === 'p1')).toMatchObject({ name: 'One', base_url: 'http://127.0.0.1:1/v1' });
  });

  it('PUT /config takes models.providers: adds and changes providers like the provider routes, the key sealed and never echoed', async () => {
    const db = env.h.runtime.db.db;
    const res = await env.req('PUT', '/api/v1/config', {
      models: {
        default_provider: 'patched',
        providers: {
          patched: { name: 'Patched', base_url: 'https://patched.example/v1', api_key: PATCH_KEY, models: [{ name: 'pm', alias: 'default' }] },
          p2: { model: 'bigger' },
        },
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().models.default_provider).toBe('patched');
    expect(res.json().models.providers.patched).toEqual({ id: 'patched', name: 'Patched', base_url: 'https://patched.example/v1', model: 'pm', models: [{ name: 'pm', alias: 'default' }] });
    expect(res.json().models.providers.p2.model).toBe('bigger');
    const row = await getProvider(db, 'patched');
    expect(row?.apiKeySealed).not.toContain(PATCH_KEY);
    expect(env.h.runtime.secrets.open(row!.apiKeySealed!)).toBe(PATCH_KEY);
    await waitForInvalidation('patched');

    // The provider routes' checks, naming where in the patch; nothing is written when one fails.
    const refused: Array<[unknown, string]> = [
      [{ fresh: { name: 'No URL' } }, 'models.providers.fresh: must have required properties base_url'],
      [{ p2: { base_url: 'ftp://x' } }, 'models.providers.p2.base_url: must match pattern "^https?://"'],
      [{ p2: { colour: 'red' } }, 'models.providers.p2.colour is not a provider field'],
      [{ p2: { id: 'p9' } }, 'models.providers.p2.id: "p9" does not match its key "p2"'],
      [{ p2: { models: [{ name: 'a', alias: 'default' }, { name: 'b', alias: 'default' }] } }, 'models.providers.p2.models: more than one model has alias "default"'],
      [{ 'bad id!': { base_url: 'https://x.example' } }, 'id: "bad id!" is not an id (letters, digits, _ and -, 1 to 64 characters); name the provider by another key of models.providers'],
    ];
    for (const [providers, error] of refused) {
      const bad = await env.req('PUT', '/api/v1/config', { models: { providers: { later: { base_url: 'https://later.example/v1' }, ...(providers as object) } } });
      expect(bad.statusCode, error).toBe(400);
      expect(bad.json().error).toBe(`Invalid input: ${error}`);
    }
    expect(await getProvider(db, 'later')).toBeUndefined();
    expect((await env.req('PUT', '/api/v1/config', { models: { providers: { later: { base_url: 'https://later.example/v1' } } }, server: { port: 'x' } })).statusCode).toBe(400);
    expect(await getProvider(db, 'later')).toBeUndefined();
  });
}

describe('model provider routes (embedded, PGlite)', () => {
  restSuite(async () => ({ cleanup: async () => {} }));
});

describeWithPostgres('model provider routes (Postgres)', () => {
  let test: TestDatabase | undefined;
  restSuite(async () => {
    test = await createTestDatabase();
    return { db: test.handle, cleanup: async () => void (await test?.drop()) };
  });
});

describe('seeding providers from the file', () => {
  const open: Harness[] = [];
  const dbs: DbHandle[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((h) => h.close()));
    await Promise.all(dbs.splice(0).map((d) => d.close()));
  });
  const start = async (yaml: string, db: DbHandle) => {
    const h = await startHarness(yaml, { db });
    open.push(h);
    return h;
  };
  const restart = async (yaml: string, db: DbHandle) => {
    await open.pop()?.close();
    return start(yaml, db);
  };
  const providers = async (h: Harness) =>
    (await h.app.inject({ method: 'GET', url: '/api/v1/config/models/providers' })).json() as Array<{ id: string; name: string; base_url: string; hasApiKey: boolean }>;
  const provider = async (h: Harness, id: string) => (await providers(h)).find((p) => p.id === id);

  it('keeps API changes while the file entry is unchanged, re-imports a changed entry, never removes API providers', async () => {
    const db = await createTestPglite();
    dbs.push(db);
    const v1 = 'models:\n  providers:\n    f: {name: File, base_url: "http://127.0.0.1:1/v1"}\n';
    let h = await start(v1, db);
    expect(await provider(h, 'f')).toMatchObject({ name: 'File', hasApiKey: false });
    await h.app.inject({ method: 'PUT', url: '/api/v1/config/models/providers/f', payload: { name: 'Renamed by API' } });
    await h.app.inject({ method: 'PUT', url: '/api/v1/config/models/providers/f/api-key', payload: { apiKey: API_KEY_1 } });
    await h.app.inject({ method: 'POST', url: '/api/v1/config/models/providers', payload: { id: 'api_made', base_url: 'http://127.0.0.1:2/v1' } });

    h = await restart(v1, db);
    expect(await provider(h, 'f')).toMatchObject({ name: 'Renamed by API', hasApiKey: true });

    // The entry changed in the file: the file wins (a file entry without api_key keeps the API's key).
    h = await restart('models:\n  providers:\n    f: {name: File v2, base_url: "http://127.0.0.1:1/v1"}\n', db);
    expect(await provider(h, 'f')).toMatchObject({ name: 'File v2', base_url: 'http://127.0.0.1:1/v1', hasApiKey: true });
    expect(h.logs.some((l) => l.includes('model provider updated from the configuration file'))).toBe(true);
    // ...but not to another host: the API's key was given for the old base_url.
    h = await restart('models:\n  providers:\n    f: {name: File v2, base_url: "http://127.0.0.1:3/v1"}\n', db);
    expect(await provider(h, 'f')).toMatchObject({ base_url: 'http://127.0.0.1:3/v1', hasApiKey: false });

    // Gone from the file: both stay; the file may name an API provider as the default.
    h = await restart('models:\n  default_provider: api_made\n', db);
    expect((await providers(h)).map((p) => p.id)).toEqual(['api_made', 'f']);
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/config' })).json().models.default_provider).toBe('api_made');
    for (const l of h.logs) expect(l).not.toContain(API_KEY_1);
  });

  it('warns when the default provider exists nowhere; a file default outside its own providers stops the start', async () => {
    const db = await createTestPglite();
    dbs.push(db);
    const h = await start('models:\n  default_provider: ghost\n', db);
    expect(h.logs.some((l) => l.includes('"level":40') && l.includes('models.default_provider names a provider that does not exist'))).toBe(true);
    await expect(
      startHarness('models:\n  default_provider: ghost\n  providers:\n    p: {base_url: "http://127.0.0.1:1/v1"}\n', { db }),
    ).rejects.toThrow('models.default_provider: "ghost" is not one of models.providers');
  });

  it('lets only an admin change providers when authentication is required', async () => {
    const db = await createTestPglite();
    dbs.push(db);
    const h = await start('security:\n  requireAuth: true\n  users: {admin: admin-password, bob: bob-password}\n', db);
    const bob = await login(h.app, 'bob', 'bob-password');
    const admin = await login(h.app, 'admin', 'admin-password');
    const payload = { id: 'x', base_url: 'http://127.0.0.1:1/v1' };
    const url = '/api/v1/config/models/providers';
    expect((await h.app.inject({ method: 'POST', url, payload })).statusCode).toBe(401);
    expect((await h.app.inject({ method: 'POST', url, payload, headers: bearer(bob) })).statusCode).toBe(403);
    expect((await h.app.inject({ method: 'GET', url, headers: bearer(bob) })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'POST', url, payload, headers: bearer(admin) })).statusCode).toBe(201);
  });
});

describe('the first provider becomes the default (issue 42)', () => {
  let h: Harness | undefined;
  beforeAll(async () => {
    h = await startHarness('{}\n');
  }, 300_000);
  afterAll(async () => {
    await h?.close();
  });
  const inject = async (method: InjectOptions['method'], url: string, payload?: unknown) =>
    (await h!.app.inject({ method, url: `/api/v1${url}`, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) })).json();
  const defaultProvider = async () => ((await inject('GET', '/config/models')) as { default_provider: string }).default_provider;

  it('POST: the first provider becomes models.default_provider, a second does not unless `default: true`', async () => {
    expect(await defaultProvider()).toBe('');
    expect(await inject('POST', '/config/models/providers', { id: 'first', base_url: 'http://127.0.0.1:1/v1' })).toMatchObject({ id: 'first' });
    expect(await defaultProvider()).toBe('first');
    await inject('POST', '/config/models/providers', { id: 'second', base_url: 'http://127.0.0.1:2/v1' });
    expect(await defaultProvider()).toBe('first');
    await inject('POST', '/config/models/providers', { id: 'third', base_url: 'http://127.0.0.1:3/v1', default: true });
    expect(await defaultProvider()).toBe('third');
    expect(await inject('POST', '/config/models/providers', { id: 'bad', base_url: 'http://127.0.0.1:3/v1', default: 'yes' })).toMatchObject({ error: expect.stringContaining('default') });
  });

  it('PUT /config with models.providers: the default the patch names wins over the first-provider rule', async () => {
    await inject('PUT', '/config', { models: { providers: { a: { base_url: 'http://127.0.0.1:1/v1' }, b: { base_url: 'http://127.0.0.1:2/v1' } }, default_provider: 'b' } });
    expect(await defaultProvider()).toBe('b');
    // `default` is a flag of the create route, not a provider field.
    expect(await inject('PUT', '/config', { models: { providers: { c: { base_url: 'http://127.0.0.1:3/v1', default: true } } } })).toMatchObject({ error: expect.stringContaining('default') });
  });
});
