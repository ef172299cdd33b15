import { afterEach, describe, expect, it } from 'vitest';
import { insertRuleChain, type DbHandle } from '@agentry/db';
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

describe('seeding channel accounts and bindings from the file', () => {
  const file = (bindings: string) =>
    [
      'channels:',
      '  chat_d:',
      '    accounts:',
      '      tg: {name: Team, app_secret: file-bot-token-123, secret: file-hook-secret, dm_policy: allow}',
      `bindings: ${bindings}`,
      '',
    ].join('\n');

  it('imports accounts (secrets sealed, never shown) and bindings; API changes survive an unchanged file, a changed list replaces them', async () => {
    const db = await sharedDb();
    await insertRuleChain(db.db, { id: 'helper', kind: 'agent', agentId: null, name: 'helper', category: null, dsl: { ruleChain: { id: 'helper', name: 'helper' }, metadata: { nodes: [], connections: [] } } });
    const listed = '[{agent_id: helper, match: {channel: chat_d, account_id: tg}}, {agent_id: nobody, match: {default: true}}]';
    let h = await start(file(listed), db);
    const get = async (url: string) => (await h.app.inject({ method: 'GET', url })).body;
    expect(JSON.parse(await get('/api/v1/channels/chat_d/accounts/tg'))).toMatchObject({ id: 'tg', name: 'Team', hasSecret: true, dmPolicy: 'allow' });
    expect(await get('/api/v1/channels')).not.toContain('file-bot-token-123');
    // The binding naming an unknown agent is skipped with a warning, not a failed start.
    expect(JSON.parse(await get('/api/v1/bindings'))).toEqual({ bindings: [{ agentId: 'helper', match: { default: false, channel: 'chat_d', accountId: 'tg' } }] });
    expect(h.logs.some((l) => l.includes('no such agent'))).toBe(true);
    expect(h.logs.join('')).not.toContain('file-bot-token-123');
    await h.close();
    open.length = 0;

    const valid = '[{agent_id: helper, match: {channel: chat_d, account_id: tg}}]';
    h = await start(file(valid), db);
    expect((await h.app.inject({ method: 'PUT', url: '/api/v1/bindings', payload: { bindings: [{ agentId: 'helper', match: { default: true } }] } })).statusCode).toBe(200);
    await h.close();
    open.length = 0;

    h = await start(file(valid), db);
    expect(JSON.parse(await get('/api/v1/bindings'))).toEqual({ bindings: [{ agentId: 'helper', match: { default: true } }] });
    await h.close();
    open.length = 0;

    h = await start(file('[{agent_id: helper, match: {channel: chat_d}}]'), db);
    expect(JSON.parse(await get('/api/v1/bindings'))).toEqual({ bindings: [{ agentId: 'helper', match: { default: false, channel: 'chat_d' } }] });
  });
});

describe('server.trust_proxy', () => {
  const ipLogged = async (yaml: string) => {
    const h = await start(yaml);
    await h.app.inject({ method: 'GET', url: '/api/v1/channels', headers: { 'x-forwarded-for': '203.0.113.9' } });
    return h.logs.some((l) => l.includes('"remoteAddress":"203.0.113.9"'));
  };
  it('believes X-Forwarded-For from one proxy hop when set, and never by default', async () => {
    expect(await ipLogged('server: {trust_proxy: 1}\n')).toBe(true);
    expect(await ipLogged('server: {trust_proxy: "127.0.0.1"}\n')).toBe(true);
    expect(await ipLogged('{}\n')).toBe(false);
  });
});
