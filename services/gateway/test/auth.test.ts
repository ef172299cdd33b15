import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteUsersExcept, listSettings, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { HOW_TO_GET_A_KEY } from '../src/auth/auth.js';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

const SECRETS = {
  adminPassword: 'Adm1n-pass-word',
  bobPassword: 'b0b-pass-word',
  bobKey: 'sk-bob-user-key-0123456789abcdef',
  accountKey: 'sk-api-account-key-0123456789',
  disabledKey: 'sk-disabled-account-key-0123456789',
  providerKey: 'sk-provider-key-0123456789',
  appSecret: 'chat-a-app-secret-0123456789',
};

const YAML = `
server: {host: 127.0.0.1}
models:
  default_provider: p
  providers:
    p: {base_url: "http://127.0.0.1:1/v1", api_key: "${SECRETS.providerKey}", model: m}
security:
  requireAuth: true
  users:
    admin: "${SECRETS.adminPassword}"
    bob: "${SECRETS.bobPassword}:${SECRETS.bobKey}"
channels:
  api:
    accounts:
      app1: {name: App one, api_key: "${SECRETS.accountKey}"}
      off: {name: Disabled, enabled: false, api_key: "${SECRETS.disabledKey}"}
  chat_a:
    accounts:
      bot: {name: Bot, app_id: cli_123, app_secret: "${SECRETS.appSecret}"}
`;

let h: Harness;
let db: DbHandle;
const responses: string[] = [];

beforeAll(async () => {
  db = await createTestPglite();
  h = await startHarness(YAML, { db });
});
afterAll(async () => {
  await h.close();
  await db.close();
});

async function call(method: 'GET' | 'POST' | 'PUT', url: string, headers: Record<string, string> = {}, payload?: unknown) {
  const res = await h.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  if (method === 'GET') responses.push(res.body);
  return res;
}

describe('login and JWT', () => {
  it('logs in and uses the JWT for management while requireAuth is true', async () => {
    expect((await call('GET', '/api/v1/config')).statusCode).toBe(401);
    const res = await call('POST', '/api/v1/auth/login', {}, { username: 'admin', password: SECRETS.adminPassword });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { token: string; expireAt: string };
    expect(body.token.split('.')).toHaveLength(3);
    const hours = (Date.parse(body.expireAt) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
    const config = await call('GET', '/api/v1/config', bearer(body.token));
    expect(config.statusCode).toBe(200);
    expect(config.json().security).toEqual({ requireAuth: true, users: { admin: true, bob: true }, allowFrom: { management: [], chat: [] } });
  });

  it('answers a wrong password and an unknown user alike', async () => {
    const wrong = await call('POST', '/api/v1/auth/login', {}, { username: 'admin', password: 'nope-nope' });
    const unknown = await call('POST', '/api/v1/auth/login', {}, { username: 'mallory', password: 'nope-nope' });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.json()).toEqual(unknown.json());
    expect(wrong.json()).toEqual({ error: 'Authentication required: wrong username or password' });
  });

  it('rejects a malformed login body with 400', async () => {
    const res = await call('POST', '/api/v1/auth/login', {}, { username: 'admin' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/password/);
  });

  it('refuses API keys and anonymous callers on management routes', async () => {
    expect((await call('GET', '/api/v1/config', bearer(SECRETS.bobKey))).json()).toEqual({
      error: 'Authentication required: management routes need a JWT, not an API key',
    });
    expect((await call('GET', '/api/v1/config', { authorization: 'Basic abc' })).statusCode).toBe(401);
    // An unknown route is a 404 to everyone: it asks for no credentials.
    const unknown = await call('GET', '/api/v1/nothing');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).not.toMatch(/JWT|log in|API key/);
  });

  it('never guards the probes', async () => {
    expect((await call('GET', '/health')).body).toBe('OK');
    expect((await call('GET', '/ready')).statusCode).toBe(200);
  });

  it('lets only admins write configuration', async () => {
    const bob = await login(h.app, 'bob', SECRETS.bobPassword);
    expect((await call('GET', '/api/v1/config', bearer(bob))).statusCode).toBe(200);
    const denied = await call('PUT', '/api/v1/config', bearer(bob), { server: { port: 9999 } });
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error).toMatch(/only an admin/);
    const admin = await login(h.app, 'admin', SECRETS.adminPassword);
    expect((await call('PUT', '/api/v1/config', bearer(admin), { server: { port: 9999 } })).statusCode).toBe(200);
  });
});

describe('JWT hardening', () => {
  const key = new TextEncoder().encode('x'.repeat(32));
  const claims = { tv: 0 };

  it.each([
    ['alg none', async () => new UnsecuredJWT(claims).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').encode()],
    [
      'RS256 (algorithm confusion)',
      async () => {
        const { privateKey } = await generateKeyPair('RS256');
        return new SignJWT(claims).setProtectedHeader({ alg: 'RS256' }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').sign(privateKey);
      },
    ],
    ['another secret', async () => new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').sign(key)],
  ])('rejects %s', async (_name, make) => {
    const res = await call('GET', '/api/v1/config', bearer(await make()));
    expect(res.statusCode).toBe(401);
  });

  it('rejects a tampered token, a wrong issuer and an expired token', async () => {
    const good = await login(h.app, 'admin', SECRETS.adminPassword);
    const [head, payload, sig] = good.split('.') as [string, string, string];
    const forged = JSON.parse(Buffer.from(payload, 'base64url').toString());
    forged.sub = 'bob';
    const tampered = `${head}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${sig}`;
    expect((await call('GET', '/api/v1/config', bearer(tampered))).statusCode).toBe(401);

    // Signed with the real secret (kept sealed in settings) but with wrong claims.
    const [stored] = await listSettings(db.db, 'security.jwt_secret');
    const secret = new TextEncoder().encode(h.runtime.secrets.open(String(stored!.value)));
    const sign = (iss: string, exp: number) =>
      new SignJWT({ tv: 0 }).setProtectedHeader({ alg: 'HS256' }).setIssuer(iss).setSubject('admin').setExpirationTime(exp).sign(secret);
    const now = Math.floor(Date.now() / 1000);
    expect((await call('GET', '/api/v1/config', bearer(await sign('agentry', now + 600)))).statusCode).toBe(200);
    expect((await call('GET', '/api/v1/config', bearer(await sign('someone-else', now + 600)))).statusCode).toBe(401);
    expect((await call('GET', '/api/v1/config', bearer(await sign('agentry', now - 10)))).json()).toEqual({
      error: 'Authentication required: token expired',
    });
  });
});

describe('chat credentials', () => {
  const chat = (headers: Record<string, string>) => h.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers, payload: {} });

  it('accepts an enabled api account key, a user API key and a JWT', async () => {
    expect((await chat(bearer(SECRETS.accountKey))).json()).toEqual({ principal: { kind: 'account', platform: 'api', accountId: 'app1' } });
    expect((await chat(bearer(SECRETS.bobKey))).json()).toEqual({ principal: { kind: 'user', username: 'bob', role: 'user', via: 'apiKey' } });
    const jwt = await login(h.app, 'admin', SECRETS.adminPassword);
    expect((await chat(bearer(jwt))).json().principal).toMatchObject({ kind: 'user', username: 'admin', via: 'jwt' });
  });

  it.each([
    ['a disabled account key', bearer(SECRETS.disabledKey), `Authentication required: invalid API key: ${HOW_TO_GET_A_KEY}`],
    ['an unknown key', bearer('sk-not-a-key-0123456789'), `Authentication required: invalid API key: ${HOW_TO_GET_A_KEY}`],
    ['a malformed header', { authorization: 'Bearer' }, 'Authentication required: malformed Authorization header (expected "Bearer <token>")'],
    ['no header while keys exist', {}, `Authentication required: send an API key as "Authorization: Bearer <key>": ${HOW_TO_GET_A_KEY}`],
  ])('rejects %s with 401', async (_what, headers, error) => {
    const res = await chat(headers);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error });
  });
});

describe('the caller\'s API key', () => {
  it('needs a JWT: an API key is refused', async () => {
    expect((await call('GET', '/api/v1/auth/api-key', bearer(SECRETS.bobKey))).statusCode).toBe(401);
    expect((await call('GET', '/api/v1/auth/api-key')).statusCode).toBe(401);
  });

  it('shows the key and regenerates it; the old key stops working at once', async () => {
    const bob = await login(h.app, 'bob', SECRETS.bobPassword);
    expect((await call('GET', '/api/v1/auth/api-key', bearer(bob))).json()).toEqual({ apiKey: SECRETS.bobKey });
    const res = await call('POST', '/api/v1/auth/api-key', bearer(bob));
    const { apiKey } = res.json() as { apiKey: string };
    expect(apiKey).toMatch(/^sk-[A-Za-z0-9_-]{43}$/);
    const chat = (key: string) => h.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(key), payload: {} });
    expect((await chat(SECRETS.bobKey)).statusCode).toBe(401);
    expect((await chat(apiKey)).statusCode).toBe(200);
    expect((await call('GET', '/api/v1/auth/api-key', bearer(bob))).json()).toEqual({ apiKey });
  });

  it('admin without a key gets null', async () => {
    const admin = await login(h.app, 'admin', SECRETS.adminPassword);
    expect((await call('GET', '/api/v1/auth/api-key', bearer(admin))).json()).toEqual({ apiKey: null });
  });
});

describe('password change', () => {
  it('checks the old password (403) and the new length (400), then revokes older tokens', async () => {
    const first = await login(h.app, 'admin', SECRETS.adminPassword);
    const second = await login(h.app, 'admin', SECRETS.adminPassword);
    const put = (token: string, body: unknown) => call('PUT', '/api/v1/auth/password', bearer(token), body);
    expect((await put(first, { oldPassword: 'wrong-wrong', newPassword: 'long-enough-1' })).statusCode).toBe(403);
    const short = await put(first, { oldPassword: SECRETS.adminPassword, newPassword: 'short' });
    expect(short.statusCode).toBe(400);
    expect(short.json()).toEqual({ error: 'Invalid input: newPassword must be at least 8 characters' });
    const ok = await put(first, { oldPassword: SECRETS.adminPassword, newPassword: 'new-admin-pass-1' });
    expect(ok.statusCode).toBe(200);
    const fresh = (ok.json() as { token: string }).token;
    expect(ok.json()).toMatchObject({ success: true });
    for (const old of [first, second]) expect((await call('GET', '/api/v1/config', bearer(old))).statusCode).toBe(401);
    expect((await call('GET', '/api/v1/config', bearer(fresh))).statusCode).toBe(200);
    expect((await call('POST', '/api/v1/auth/login', {}, { username: 'admin', password: SECRETS.adminPassword })).statusCode).toBe(401);
    await login(h.app, 'admin', 'new-admin-pass-1');
  });

  it('needs a JWT', async () => {
    expect((await call('PUT', '/api/v1/auth/password', bearer(SECRETS.accountKey), { oldPassword: 'a', newPassword: 'b' })).statusCode).toBe(401);
  });
});

describe('login rate limit', () => {
  it('answers 429 with Retry-After after repeated failures for one username', async () => {
    const codes: number[] = [];
    const attempt = () =>
      h.app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress: '10.8.8.8', payload: { username: 'ratelimited', password: 'wrong-wrong' } });
    for (let i = 0; i < 10; i++) codes.push((await attempt()).statusCode);
    expect(codes).toEqual(Array(10).fill(401));
    const res = await attempt();
    expect(res.statusCode).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.json().error).toMatch(/^Too many requests: too many login attempts/);
  });

  // Issue 20, finding 7: ten wrong passwords for a name from anywhere answered the right one 429 for 5 minutes.
  it('failures for a username from other addresses never refuse its right password; one failing address is refused', async () => {
    const loginFrom = (remoteAddress: string, password: string) =>
      h.app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress, payload: { username: 'bob', password } });
    for (let i = 0; i < 12; i++) expect((await loginFrom(`10.6.0.${i}`, 'wrong-wrong')).statusCode).toBe(401);
    expect((await loginFrom('10.6.1.1', SECRETS.bobPassword)).statusCode).toBe(200);

    for (let i = 0; i < 10; i++) expect((await loginFrom('10.6.2.2', 'wrong-wrong')).statusCode).toBe(401);
    const refused = await loginFrom('10.6.2.2', SECRETS.bobPassword);
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error).toMatch(/too many login attempts/);
    expect((await loginFrom('10.6.3.3', SECRETS.bobPassword)).statusCode).toBe(200);
  });

  it('limits attempts per client address', async () => {
    let last = 0;
    for (let i = 0; i < 40 && last !== 429; i++) {
      last = (await h.app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress: '10.9.9.9', payload: { username: `u${i}`, password: 'x' } })).statusCode;
    }
    expect(last).toBe(429);
  });
});

describe('secrets at rest and in the open', () => {
  it('keeps no configured secret in clear text in any table', async () => {
    const tables = (await db.db.introspection.getTables()).map((t) => t.name);
    expect(tables).toEqual(expect.arrayContaining(['users', 'channel_accounts', 'settings']));
    let dump = '';
    for (const t of tables) {
      const rows = await db.db.selectFrom(t as 'settings').selectAll().execute();
      dump += JSON.stringify(rows, (_k, v) => (Buffer.isBuffer(v) ? v.toString('latin1') : v));
    }
    expect(dump.length).toBeGreaterThan(500);
    for (const secret of Object.values(SECRETS)) expect(dump).not.toContain(secret);
    expect(dump).toContain('v1.'); // sealed values are there
  });

  it('shows none in any GET response or log line of this file', async () => {
    expect(responses.length).toBeGreaterThan(10);
    const all = responses.join('\n') + h.logs.join('\n');
    for (const secret of Object.values(SECRETS)) {
      // bob's key is returned by GET /auth/api-key to bob himself, which is the point of that route.
      if (secret === SECRETS.bobKey) continue;
      expect(all).not.toContain(secret);
    }
    expect(h.logs.join('\n')).not.toContain(SECRETS.bobKey);
  });

  it('warned at start about nothing it should not (loopback host, non-default admin password)', () => {
    expect(h.logs.join('\n')).not.toMatch(/requireAuth is false|default password/);
  });
});

describe('deleted users', () => {
  it('rejects the token of a user removed since it was issued', async () => {
    const bob = await login(h.app, 'bob', SECRETS.bobPassword);
    expect((await call('GET', '/api/v1/config', bearer(bob))).statusCode).toBe(200);
    await deleteUsersExcept(db.db, ['admin']);
    await h.runtime.bus.pubsub.publish('invalidate', { area: 'users' });
    await new Promise((r) => setTimeout(r, 50));
    expect((await call('GET', '/api/v1/config', bearer(bob))).statusCode).toBe(401);
  });
});

describe('open mode (requireAuth false, no key configured)', () => {
  let open: Harness;
  beforeAll(async () => {
    open = await startHarness('server: {host: 127.0.0.1}\nsecurity:\n  requireAuth: false\n  users:\n    admin: "Adm1n-pass-word"\n');
  });
  afterAll(() => open.close());
  const chat = (headers: Record<string, string>) => open.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers, payload: {} });

  it('takes the placeholder key an OpenAI SDK must send as no key at all: the caller is anonymous', async () => {
    for (const token of ['EMPTY', 'sk-no-key-required', 'ollama']) {
      const res = await chat(bearer(token));
      expect(res.statusCode, token).toBe(200);
      expect(res.json()).toEqual({ principal: { kind: 'anonymous' } });
    }
    expect((await chat({})).json()).toEqual({ principal: { kind: 'anonymous' } });
  });

  it('still verifies a JWT: a forged one is refused, a valid one names its user', async () => {
    expect((await chat(bearer('a.b.c'))).statusCode).toBe(401);
    const jwt = await login(open.app, 'admin', 'Adm1n-pass-word');
    expect((await chat(bearer(jwt))).json().principal).toMatchObject({ kind: 'user', username: 'admin', via: 'jwt' });
  });

  it('a known key names its principal; once a key exists, an unknown one is refused again', async () => {
    const jwt = await login(open.app, 'admin', 'Adm1n-pass-word');
    const { apiKey } = (await open.app.inject({ method: 'POST', url: '/api/v1/auth/api-key', headers: bearer(jwt) })).json() as { apiKey: string };
    expect((await chat(bearer(apiKey))).json()).toEqual({ principal: { kind: 'user', username: 'admin', role: 'admin', via: 'apiKey' } });
    const refused = await chat(bearer('EMPTY'));
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ error: `Authentication required: invalid API key: ${HOW_TO_GET_A_KEY}` });
  });
});
