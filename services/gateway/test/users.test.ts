import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/** Admin user management: who may call it, what it validates, and what disabling revokes. */

const ADMIN_PASSWORD = 'Adm1n-pass-word';
const BOB_PASSWORD = 'b0b-pass-word';
const BOB_KEY = 'sk-bob-user-key-0123456789abcdef';
const yaml = (bob: string) => `
server: {host: 127.0.0.1}
security:
  requireAuth: true
  users:
    admin: "${ADMIN_PASSWORD}"
    bob: "${bob}"
`;
const YAML = yaml(`${BOB_PASSWORD}:${BOB_KEY}`);

let h: Harness;
let db: DbHandle;
let admin: string;
const bodies: string[] = [];

beforeAll(async () => {
  db = await createTestPglite();
  h = await startHarness(YAML, { db });
  admin = await login(h.app, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await h.close();
  await db.close();
});

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
async function call(method: Method, url: string, token: string | undefined, payload?: object) {
  const res = await h.app.inject({ method, url: `/api/v1${url}`, headers: token ? bearer(token) : {}, ...(payload ? { payload } : {}) });
  bodies.push(res.body);
  return res;
}
const chatWith = async (key: string) => (await h.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(key), payload: {} })).statusCode;
const loginStatus = async (username: string, password: string) =>
  (await h.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password } })).statusCode;

async function create(username: string, role: 'admin' | 'user', password = `${username}-pass-word`) {
  const res = await call('POST', '/users', admin, { username, password, role });
  expect(res.statusCode, res.body).toBe(201);
  return login(h.app, username, password);
}

describe('who may manage users', () => {
  const routes: Array<[Method, string, object?]> = [
    ['GET', '/users'],
    ['POST', '/users', { username: 'eve', password: 'eve-pass-word', role: 'admin' }],
    ['PUT', '/users/bob', { role: 'admin' }],
    ['DELETE', '/users/bob'],
  ];

  it.each(routes)('%s %s: a user-role JWT is refused with 403', async (method, url, payload) => {
    const bob = await login(h.app, 'bob', BOB_PASSWORD);
    const res = await call(method, url, bob, payload);
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toMatch(/only an admin/);
  });

  it.each(routes)('%s %s: anonymous callers get 401 and API keys are refused', async (method, url, payload) => {
    expect((await call(method, url, undefined, payload)).statusCode).toBe(401);
    expect((await call(method, url, BOB_KEY, payload)).statusCode).toBe(401);
  });

  it('lists users for an admin without hashes or keys', async () => {
    const res = await call('GET', '/users', admin);
    expect(res.statusCode).toBe(200);
    const users = res.json().users as Array<Record<string, unknown>>;
    const bob = users.find((u) => u.username === 'bob');
    expect(bob).toMatchObject({ role: 'user', disabled: false, hasApiKey: true, source: 'file' });
    expect(Object.keys(bob!).sort()).toEqual(['createdAt', 'disabled', 'hasApiKey', 'role', 'source', 'updatedAt', 'username']);
    expect(res.body).not.toMatch(/scrypt|sk-bob/);
  });
});

describe('creating users', () => {
  it('creates a user who can log in with the given role', async () => {
    const carol = await create('carol', 'user');
    expect((await call('GET', '/users', carol)).statusCode).toBe(403);
    const dan = await create('dan.admin', 'admin');
    expect((await call('GET', '/users', dan)).statusCode).toBe(200);
  });

  it.each([
    [{ username: 'carol', password: 'another-password', role: 'user' }, 409, /Already exists: user "carol"/],
    [{ username: 'bad name', password: 'long-enough', role: 'user' }, 400, /username must be 1-64 letters/],
    [{ username: '', password: 'long-enough', role: 'user' }, 400, /username must be/],
    [{ username: 'x'.repeat(65), password: 'long-enough', role: 'user' }, 400, /username must be/],
    [{ username: 'frank', password: 'short', role: 'user' }, 400, /password must be at least 8 characters/],
    [{ username: 'frank', password: 'long-enough', role: 'root' }, 400, /role must be "admin" or "user"/],
    [{ username: 'frank', role: 'user' }, 400, /password/],
  ])('refuses %j with %i', async (body, status, message) => {
    const res = await call('POST', '/users', admin, body);
    expect(res.statusCode).toBe(status);
    expect(res.json().error).toMatch(message);
  });

  it('answers a body that is not JSON with 400', async () => {
    const res = await h.app.inject({ method: 'POST', url: '/api/v1/users', headers: { ...bearer(admin), 'content-type': 'application/json' }, payload: '{' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toHaveProperty('error');
  });
});

describe('changing users', () => {
  it('disabling revokes the JWT and the API key and refuses login; enabling revives neither', async () => {
    const gina = await create('gina', 'user');
    const key = (await call('POST', '/auth/api-key', gina)).json().apiKey as string;
    expect(await chatWith(key)).toBe(200);
    const res = await call('PUT', '/users/gina', admin, { disabled: true });
    expect(res.json()).toMatchObject({ disabled: true, hasApiKey: false });
    expect((await call('GET', '/config', gina)).statusCode).toBe(401);
    expect(await chatWith(key)).toBe(401);
    const refused = await h.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'gina', password: 'gina-pass-word' } });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatch(/disabled/);
    expect(await loginStatus('gina', 'wrong-password')).toBe(401);

    expect((await call('PUT', '/users/gina', admin, { disabled: false })).json()).toMatchObject({ disabled: false });
    expect((await call('GET', '/config', gina)).statusCode).toBe(401);
    expect(await chatWith(key)).toBe(401);
    expect(await loginStatus('gina', 'gina-pass-word')).toBe(200);
  });

  it('a file-seeded user is disabled like any other (its file key too)', async () => {
    expect(await chatWith(BOB_KEY)).toBe(200);
    expect((await call('PUT', '/users/bob', admin, { disabled: true })).statusCode).toBe(200);
    expect(await chatWith(BOB_KEY)).toBe(401);
    expect((await call('PUT', '/users/bob', admin, { disabled: false })).statusCode).toBe(200);
  });

  it('a password reset revokes older JWTs and replaces the password', async () => {
    const hana = await create('hana', 'user');
    const res = await call('PUT', '/users/hana', admin, { password: 'reset-by-admin' });
    expect(res.statusCode).toBe(200);
    expect((await call('GET', '/config', hana)).statusCode).toBe(401);
    expect(await loginStatus('hana', 'hana-pass-word')).toBe(401);
    expect(await loginStatus('hana', 'reset-by-admin')).toBe(200);
  });

  it('changes the role, which takes effect on the next request', async () => {
    const ivan = await create('ivan', 'user');
    expect((await call('GET', '/users', ivan)).statusCode).toBe(403);
    expect((await call('PUT', '/users/ivan', admin, { role: 'admin' })).json()).toMatchObject({ role: 'admin' });
    expect((await call('GET', '/users', ivan)).statusCode).toBe(200);
  });

  it.each([
    [{}, 400, /send at least one of role, disabled, password/],
    [{ password: 'short' }, 400, /password must be at least 8 characters/],
    [{ role: 'owner' }, 400, /role must be "admin" or "user"/],
    [{ disabled: 'yes' }, 400, /body\.disabled/],
    // A misspelt field is dropped like any unknown one, which leaves nothing to change.
    [{ disable: true }, 400, /unknown field "?disable"?/],
  ])('refuses %j with %i', async (body, status, message) => {
    const res = await call('PUT', '/users/bob', admin, body);
    expect(res.statusCode).toBe(status);
    expect(res.json().error).toMatch(message);
  });

  it('answers 404 for an unknown user', async () => {
    const res = await call('PUT', '/users/nobody', admin, { disabled: true });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toBe('Not found: user "nobody"');
    expect((await call('DELETE', '/users/nobody', admin)).statusCode).toBe(404);
  });
});

describe('the last enabled admin', () => {
  it('cannot be disabled, demoted or deleted; another enabled admin lifts the rule', async () => {
    const solo = await startHarness(`security:\n  requireAuth: true\n  users:\n    admin: "${ADMIN_PASSWORD}"\n`);
    try {
      const token = await login(solo.app, 'admin', ADMIN_PASSWORD);
      const put = (name: string, payload: object) => solo.app.inject({ method: 'PUT', url: `/api/v1/users/${name}`, headers: bearer(token), payload });
      for (const payload of [{ disabled: true }, { role: 'user' }]) {
        const res = await put('admin', payload);
        expect(res.statusCode).toBe(409);
        expect(res.json().error).toBe('At least one enabled admin must remain: "admin" is the only enabled admin; give another user the admin role first');
      }
      const created = await solo.app.inject({ method: 'POST', url: '/api/v1/users', headers: bearer(token), payload: { username: 'second', password: 'second-pass', role: 'admin' } });
      expect(created.statusCode).toBe(201);
      expect((await put('second', { disabled: true })).statusCode).toBe(200);
      const last = await solo.app.inject({ method: 'DELETE', url: '/api/v1/users/second', headers: bearer(token) });
      expect(last.statusCode).toBe(200);
      expect((await put('admin', { disabled: true })).statusCode).toBe(409);
      await solo.app.inject({ method: 'POST', url: '/api/v1/users', headers: bearer(token), payload: { username: 'third', password: 'third-pass', role: 'admin' } });
      expect((await put('admin', { role: 'user' })).statusCode).toBe(200);
      const third = await login(solo.app, 'third', 'third-pass');
      const deleteThird = await solo.app.inject({ method: 'DELETE', url: '/api/v1/users/third', headers: bearer(third) });
      expect(deleteThird.statusCode).toBe(409);
      expect(deleteThird.json().error).toMatch(/only enabled admin/);
    } finally {
      await solo.close();
    }
  });
});

describe('deleting users', () => {
  it('deletes an API-created user and revokes its JWT', async () => {
    const jack = await create('jack', 'user');
    expect((await call('DELETE', '/users/jack', admin)).json()).toEqual({ success: true });
    expect((await call('GET', '/config', jack)).statusCode).toBe(401);
    expect(await loginStatus('jack', 'jack-pass-word')).toBe(401);
  });

  it('refuses to delete a file-seeded user (the next start would bring it back)', async () => {
    const res = await call('DELETE', '/users/bob', admin);
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatch(/remove "bob" from security.users in the configuration file/);
  });
});

describe('GET /config', () => {
  it('shows every user to an admin and only themselves to a user', async () => {
    const all = (await call('GET', '/config', admin)).json().security.users as Record<string, boolean>;
    expect(Object.keys(all)).toEqual(expect.arrayContaining(['admin', 'bob', 'carol']));
    const bob = await login(h.app, 'bob', BOB_PASSWORD);
    expect((await call('GET', '/config', bob)).json().security.users).toEqual({ bob: true });
  });
});

describe('responses', () => {
  it('never carried a password, a hash or a key', () => {
    const all = bodies.join('\n');
    for (const secret of [ADMIN_PASSWORD, BOB_PASSWORD, BOB_KEY, 'reset-by-admin', 'scrypt$']) expect(all).not.toContain(secret);
  });
});

describe('across a restart with the same database', () => {
  it('keeps API-created users, and the API role and disable of a seeded user whose file entry changed', async () => {
    expect((await call('PUT', '/users/bob', admin, { role: 'admin', disabled: true })).statusCode).toBe(200);
    const newKey = 'sk-bob-new-file-key-0123456789abcdef';
    const next = await startHarness(yaml(`b0b-new-password:${newKey}`), { db });
    try {
      const token = await login(next.app, 'admin', ADMIN_PASSWORD);
      const users = (await next.app.inject({ method: 'GET', url: '/api/v1/users', headers: bearer(token) })).json().users as Array<{ username: string }>;
      expect(users.find((u) => u.username === 'carol')).toMatchObject({ source: 'api', role: 'user' });
      expect(users.find((u) => u.username === 'bob')).toMatchObject({ source: 'file', role: 'admin', disabled: true, hasApiKey: true });
      const bob = await next.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'bob', password: 'b0b-new-password' } });
      expect(bob.statusCode).toBe(403);
      // The file gave the disabled user a key again: it stays refused until an admin enables bob.
      const chat = () => next.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(newKey), payload: {} });
      expect((await chat()).statusCode).toBe(401);
      await next.app.inject({ method: 'PUT', url: '/api/v1/users/bob', headers: bearer(token), payload: { disabled: false } });
      expect((await chat()).statusCode).toBe(200);
    } finally {
      await next.close();
    }
  });
});
