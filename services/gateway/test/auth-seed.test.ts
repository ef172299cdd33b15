import { afterEach, describe, expect, it } from 'vitest';
import type { DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/** How the configuration file seeds users, and what start-up says about risky settings. */
const open: Harness[] = [];
const dbs: DbHandle[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.close()));
  await Promise.all(dbs.splice(0).map((d) => d.close()));
});

async function start(yaml: string, db?: DbHandle): Promise<Harness> {
  const h = await startHarness(yaml, db ? { db } : {});
  open.push(h);
  return h;
}

async function sharedDb(): Promise<DbHandle> {
  const db = await createTestPglite();
  dbs.push(db);
  return db;
}

const status = async (h: Harness, username: string, password: string) =>
  (await h.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password } })).statusCode;

describe('seeding users from the file', () => {
  it('creates admin with the default password when no user is configured, and warns', async () => {
    const h = await start('security: {requireAuth: true}\n');
    expect(await status(h, 'admin', 'admin')).toBe(200);
    const warnings = h.logs.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40);
    expect(warnings.map((w) => w.msg)).toContain(
      'the admin user still has the default password while security.requireAuth is true: change it (PUT /api/v1/auth/password)',
    );
  });

  it('warns when management is open on a non-loopback address', async () => {
    const h = await start('server: {host: 0.0.0.0}\n');
    expect(h.logs.some((l) => l.includes('"level":40') && l.includes('requireAuth is false while listening on a non-loopback address'))).toBe(true);
    const quiet = await start('server: {host: 127.0.0.1}\n');
    expect(quiet.logs.some((l) => l.includes('non-loopback'))).toBe(false);
  });

  it('keeps an API password change while the file entry is unchanged, re-imports a changed entry, removes dropped users', async () => {
    const db = await sharedDb();
    const v1 = 'security:\n  users:\n    admin: first-password\n    carol: carol-password\n';
    let h = await start(v1, db);
    const token = await login(h.app, 'admin', 'first-password');
    const changed = await h.app.inject({
      method: 'PUT',
      url: '/api/v1/auth/password',
      headers: bearer(token),
      payload: { oldPassword: 'first-password', newPassword: 'changed-by-api' },
    });
    expect(changed.statusCode).toBe(200);
    await h.close();
    open.length = 0;

    h = await start(v1, db);
    expect(await status(h, 'admin', 'changed-by-api')).toBe(200);
    expect(await status(h, 'admin', 'first-password')).toBe(401);
    await h.close();
    open.length = 0;

    h = await start('security:\n  users:\n    admin: second-password\n', db);
    expect(await status(h, 'admin', 'second-password')).toBe(200);
    expect(await status(h, 'admin', 'changed-by-api')).toBe(401);
    expect(await status(h, 'carol', 'carol-password')).toBe(401);
    expect(h.logs.some((l) => l.includes('"removed":["carol"]'))).toBe(true);
  });

  it('refuses to start when two entries share an API key', async () => {
    await expect(
      startHarness(
        'security:\n  users:\n    a: "pw:sk-same-key-0123456789"\nchannels:\n  api:\n    accounts:\n      x: {api_key: "sk-same-key-0123456789"}\n',
      ),
    ).rejects.toThrow('channels.api.accounts.x.api_key: the same API key is also set at security.users.a');
  });

  it('refuses an API key shorter than 16 characters', async () => {
    await expect(startHarness('security:\n  users:\n    a: "pw:short"\n')).rejects.toThrow(
      'security.users.a: the API key after the colon must be at least 16 characters',
    );
  });

  it('leaves chat open when no key exists and requireAuth is false', async () => {
    const h = await start('server: {host: 127.0.0.1}\n');
    const res = await h.app.inject({ method: 'POST', url: '/api/v1/test-chat', payload: {} });
    expect(res.json()).toEqual({ principal: { kind: 'anonymous' } });
  });
});
