import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/** The web UI's static serving, and the two routes the UI added: auth status and provider test. */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-ui-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function gatewayWith(uiDir: string | undefined): Promise<{ app: FastifyInstance; runtime: Runtime; logs: string[] }> {
  const cwd = fs.mkdtempSync(path.join(tmp, 'cwd-'));
  const logs: string[] = [];
  const runtime = await bootstrap({
    service: 'gateway-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'ui-test-master-key-0123456789-abcdef' },
    cwd,
    logDestination: { write: (l: string) => void logs.push(l) },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await seedGateway(runtime);
  const app = await buildGateway(runtime, uiDir === undefined ? {} : { uiDir });
  await app.ready();
  return { app, runtime, logs };
}

describe('web UI serving', () => {
  const uiDir = path.join(tmp, 'build');
  let app: FastifyInstance;
  let runtime: Runtime;

  beforeAll(async () => {
    fs.mkdirSync(path.join(uiDir, 'assets'), { recursive: true });
    fs.writeFileSync(path.join(uiDir, 'index.html'), '<!doctype html><title>Agentry</title><script type="module" src="/assets/app-1a2b.js"></script>');
    fs.writeFileSync(path.join(uiDir, 'assets', 'app-1a2b.js'), 'console.log(1);');
    fs.writeFileSync(path.join(uiDir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    fs.writeFileSync(path.join(uiDir, '.secret'), 'hidden');
    ({ app, runtime } = await gatewayWith(uiDir));
  });
  afterAll(async () => {
    await app?.close();
    await runtime?.lifecycle.shutdown('test');
  });

  it('serves index.html at / with the security headers and no-cache', async () => {
    const res = await app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('<title>Agentry</title>');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cache-control']).toBe('no-cache');
    const head = await app.inject({ method: 'HEAD', url: '/' });
    expect(head.statusCode).toBe(200);
  });

  it('serves hashed assets with a long cache, other files with no-cache', async () => {
    const js = await app.inject({ method: 'GET', url: '/assets/app-1a2b.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toMatch(/javascript/);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.headers['x-content-type-options']).toBe('nosniff');
    const icon = await app.inject({ method: 'GET', url: '/favicon.svg' });
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['content-type']).toMatch(/^image\/svg\+xml/);
    expect(icon.headers['cache-control']).toBe('no-cache');
  });

  it('answers index.html for client-side routes (history fallback), never for /api or a missing asset', async () => {
    for (const url of ['/chat/helper/web-1', '/agents', '/settings?tab=x']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('<title>Agentry</title>');
      expect(res.headers['content-security-policy'], url).toBeDefined();
    }
    const api = await app.inject({ method: 'GET', url: '/api/v1/no-such-route' });
    expect(api.statusCode).toBe(404);
    expect(api.json()).toEqual({ error: expect.stringMatching(/no-such-route/) });
    const asset = await app.inject({ method: 'GET', url: '/assets/gone-0000.js' });
    expect(asset.statusCode).toBe(404);
    expect(asset.json()).toHaveProperty('error');
    expect((await app.inject({ method: 'POST', url: '/agents' })).statusCode).toBe(404);
  });

  it('keeps the probes and the API, and never serves dotfiles or paths outside the build', async () => {
    expect((await app.inject({ method: 'GET', url: '/health' })).body).toBe('OK');
    expect((await app.inject({ method: 'GET', url: '/api/v1/config' })).statusCode).toBe(200);
    for (const url of ['/.secret', '/..%2f..%2fetc%2fpasswd', '/assets/..%2f.secret', '/%00']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.body, url).not.toContain('hidden');
      expect(res.body, url).not.toContain('root:');
    }
  });

  it('leaves / a 404 without a UI directory, and with an unbuilt one (saying so in the log)', async () => {
    const none = await gatewayWith(undefined);
    expect((await none.app.inject({ method: 'GET', url: '/' })).statusCode).toBe(404);
    await none.app.close();
    await none.runtime.lifecycle.shutdown('test');

    const empty = path.join(tmp, 'empty');
    fs.mkdirSync(empty);
    const unbuilt = await gatewayWith(empty);
    expect((await unbuilt.app.inject({ method: 'GET', url: '/' })).statusCode).toBe(404);
    expect(unbuilt.logs.join('\n')).toMatch(/web UI is not built/);
    await unbuilt.app.close();
    await unbuilt.runtime.lifecycle.shutdown('test');
  });
});

describe('GET /auth/status', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('security:\n  requireAuth: true\n  users:\n    admin: admin\n    bob: "bob-password-1"\n');
  });
  afterAll(() => h?.close());

  it('tells anyone whether a login is needed, and only the admin whether the default password is in use', async () => {
    const anonymous = await h.app.inject({ method: 'GET', url: '/api/v1/auth/status' });
    expect(anonymous.statusCode).toBe(200);
    expect(anonymous.json()).toEqual({ requireAuth: true, user: null });

    const garbage = await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer('a.b.c') });
    expect(garbage.json()).toEqual({ requireAuth: true, user: null });

    const bob = await login(h.app, 'bob', 'bob-password-1');
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer(bob) })).json()).toEqual({
      requireAuth: true,
      user: { username: 'bob', role: 'user' },
    });

    const admin = await login(h.app, 'admin', 'admin');
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer(admin) })).json()).toEqual({
      requireAuth: true,
      user: { username: 'admin', role: 'admin' },
      defaultPassword: true,
    });

    const changed = await h.app.inject({
      method: 'PUT',
      url: '/api/v1/auth/password',
      headers: bearer(admin),
      payload: { oldPassword: 'admin', newPassword: 'a-much-longer-one' },
    });
    expect(changed.statusCode).toBe(200);
    const fresh = (changed.json() as { token: string }).token;
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer(fresh) })).json()).toMatchObject({ defaultPassword: false });
    // The token from before the change is revoked: no user.
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer(admin) })).json()).toEqual({ requireAuth: true, user: null });
  });
});

describe('GET /auth/status on an open server', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('security:\n  requireAuth: false\n  users:\n    admin: admin\n    bob: "bob-password-1"\n');
  });
  afterAll(() => h?.close());

  it('tells an anonymous visitor about the default password (they already have admin power), not a logged-in user', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status' })).json()).toEqual({ requireAuth: false, user: null, defaultPassword: true, chatNeedsKey: false });
    const bob = await login(h.app, 'bob', 'bob-password-1');
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status', headers: bearer(bob) })).json()).toEqual({
      requireAuth: false,
      user: { username: 'bob', role: 'user' },
    });
    const admin = await login(h.app, 'admin', 'admin');
    const changed = await h.app.inject({
      method: 'PUT',
      url: '/api/v1/auth/password',
      headers: bearer(admin),
      payload: { oldPassword: 'admin', newPassword: 'a-much-longer-one' },
    });
    expect(changed.statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status' })).json()).toEqual({ requireAuth: false, user: null, defaultPassword: false, chatNeedsKey: false });
  });

  it("tells whether chat needs a key by the gateway's own rule: a user's own API key counts, as an API account's does", async () => {
    const status = async () => ((await h.app.inject({ method: 'GET', url: '/api/v1/auth/status' })).json() as { chatNeedsKey?: boolean }).chatNeedsKey;
    expect(await status()).toBe(false);
    const bob = await login(h.app, 'bob', 'bob-password-1');
    const made = await h.app.inject({ method: 'POST', url: '/api/v1/auth/api-key', headers: bearer(bob) });
    expect(made.statusCode).toBe(200);
    await expect.poll(status).toBe(true);
    // The rule the flag tells: an anonymous chat is now refused.
    const chat = await h.app.inject({ method: 'POST', url: '/api/v1/chat/completions', payload: { model: 'nope', messages: [{ role: 'user', content: 'hi' }] } });
    expect(chat.statusCode).toBe(401);
  });
});

describe('POST /config/models/providers/{name}/test', () => {
  const KEY = 'sk-provider-test-secret-0001';
  let h: Harness;
  let fake: FakeModel;
  let noList: http.Server;
  let noListUrl: string;

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: KEY });
    // A provider without GET /models: the test falls back to a one-token chat call.
    noList = http.createServer((req, res) => {
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'p' }, finish_reason: 'length' }] }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => noList.listen(0, '127.0.0.1', resolve));
    noListUrl = `http://127.0.0.1:${(noList.address() as AddressInfo).port}/v1`;
    h = await startHarness(
      [
        'models:',
        '  default_provider: good',
        '  providers:',
        `    good: {base_url: "${fake.url}", api_key: "${KEY}", model: fake-model}`,
        `    wrongkey: {base_url: "${fake.url}", api_key: "sk-wrong-key-00000000", model: fake-model}`,
        '    down: {base_url: "http://127.0.0.1:1/v1", model: m}',
        `    nolist: {base_url: "${noListUrl}", model: small}`,
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
    await new Promise((resolve) => noList?.close(resolve));
  });

  const test = (name: string) => h.app.inject({ method: 'POST', url: `/api/v1/config/models/providers/${name}/test` });

  it('lists the models of a reachable provider', async () => {
    const res = await test('good');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, latencyMs: expect.any(Number), method: 'models', models: ['fake-model'] });
  });

  it('reports a refused key, an unreachable host and an unknown provider, never the key', async () => {
    const wrong = await test('wrongkey');
    expect(wrong.statusCode).toBe(200);
    expect(wrong.json()).toMatchObject({ ok: false, method: 'models', error: expect.stringMatching(/HTTP 401/) });
    expect(wrong.body).not.toContain('sk-wrong-key');
    const down = await test('down');
    expect(down.json()).toMatchObject({ ok: false, error: expect.stringMatching(/cannot reach http:\/\/127\.0\.0\.1:1\/v1/) });
    expect((await test('nobody')).statusCode).toBe(404);
  });

  it('falls back to a one-token chat call when the provider has no model list', async () => {
    const res = await test('nolist');
    expect(res.json()).toEqual({ ok: true, latencyMs: expect.any(Number), method: 'chat' });
  });

  it('is an admin-only write when auth is required', async () => {
    const guarded = await startHarness('security:\n  requireAuth: true\n  users:\n    admin: admin\n    bob: "bob-password-1"\n');
    try {
      const url = '/api/v1/config/models/providers/x/test';
      expect((await guarded.app.inject({ method: 'POST', url })).statusCode).toBe(401);
      const bob = await login(guarded.app, 'bob', 'bob-password-1');
      expect((await guarded.app.inject({ method: 'POST', url, headers: bearer(bob) })).statusCode).toBe(403);
      const admin = await login(guarded.app, 'admin', 'admin');
      expect((await guarded.app.inject({ method: 'POST', url, headers: bearer(admin) })).statusCode).toBe(404);
    } finally {
      await guarded.close();
    }
  });
});
