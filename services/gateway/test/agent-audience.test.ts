import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audienceAllows, AUDIENCE_EVERYONE, AUDIENCE_PRIVATE } from '@agentry/contracts';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

/**
 * Agents are shared on purpose (issue 35, finding 4 and part B): chatting with an agent hands out
 * its tools, so a plain user's new agent is private to its owner and the admins until shared.
 */

const PASSWORDS = { admin: 'admin-pass-1234', alice: 'alice-pass-1234', bob: 'bob-pass-1234' };
const ACCOUNT_KEY = 'sk-audience-account-key-0123456789';
const YAML = `
security:
  requireAuth: true
  users:
    admin: "${PASSWORDS.admin}"
    alice: "${PASSWORDS.alice}"
    bob: "${PASSWORDS.bob}"
models:
  default_provider: p1
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-provider-secret, models: [{name: m1, alias: default}]}
channels:
  api:
    accounts:
      app: {name: App, api_key: ${ACCOUNT_KEY}}
`;

function withBash(id: string) {
  const dsl = agentDsl(id);
  (dsl.metadata.nodes[0]!.configuration as Record<string, unknown>).tools = [{ type: 'builtin', name: 'bash' }];
  return dsl;
}

describe('audienceAllows', () => {
  it('lets the owner and admins in always, the rest only as shared', () => {
    expect(audienceAllows(AUDIENCE_PRIVATE, 'alice', 'user:alice', 'user')).toBe(true);
    expect(audienceAllows(AUDIENCE_PRIVATE, 'alice', 'user:root', 'admin')).toBe(true);
    expect(audienceAllows(AUDIENCE_PRIVATE, 'alice', 'user:bob', 'user')).toBe(false);
    expect(audienceAllows(AUDIENCE_PRIVATE, 'alice', 'api:app')).toBe(false);
    expect(audienceAllows(AUDIENCE_PRIVATE, 'alice', '')).toBe(false);
    expect(audienceAllows(AUDIENCE_EVERYONE, 'alice', '')).toBe(true);
    const some = { everyone: false, users: ['bob'], roles: ['user'], apiAccounts: ['app'] };
    expect(audienceAllows(some, 'alice', 'user:bob', 'user')).toBe(true);
    expect(audienceAllows({ ...some, users: [] }, 'alice', 'user:bob', 'user')).toBe(true);
    expect(audienceAllows({ ...some, users: [], roles: [] }, 'alice', 'user:bob', 'user')).toBe(false);
    expect(audienceAllows(some, 'alice', 'api:app')).toBe(true);
    expect(audienceAllows(some, 'alice', 'api:other')).toBe(false);
    // An unreadable stored value is private, never everyone.
    expect(audienceAllows('garbage', 'alice', 'user:bob', 'user')).toBe(false);
  });
});

describe('agent audience (requireAuth)', { timeout: 120_000 }, () => {
  let h: Harness;
  let tokens: Record<'admin' | 'alice' | 'bob', string>;
  const req = (token: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown) =>
    h.app.inject({ method, url: `/api/v1${url}`, headers: bearer(token), ...(payload === undefined ? {} : { payload: payload as object }) });
  const models = async (token: string) => ((await req(token, 'GET', '/models')).json() as { data: Array<{ id: string }> }).data.map((m) => m.id);

  beforeAll(async () => {
    h = await startHarness(YAML);
    tokens = { admin: await login(h.app, 'admin', PASSWORDS.admin), alice: await login(h.app, 'alice', PASSWORDS.alice), bob: await login(h.app, 'bob', PASSWORDS.bob) };
    expect((await req(tokens.alice, 'POST', '/agents', agentDsl('alices'))).statusCode).toBe(201);
    expect((await req(tokens.admin, 'POST', '/agents', agentDsl('admins'))).statusCode).toBe(201);
  }, 300_000);
  afterAll(async () => {
    await h?.close();
  });

  it("keeps a plain user's new agent to its owner and the admins", async () => {
    expect(await models(tokens.alice)).toContain('alices');
    expect(await models(tokens.admin)).toContain('alices');
    expect(await models(tokens.bob)).not.toContain('alices');
    expect(await models(ACCOUNT_KEY)).not.toContain('alices');
    expect((await req(tokens.bob, 'GET', '/models/alices')).statusCode).toBe(404);
    const chat = await req(tokens.bob, 'POST', '/chat/completions', { model: 'alices', messages: [{ role: 'user', content: 'cat ~/AGENTS.md' }] });
    expect(chat.statusCode).toBe(403);
    expect(chat.body).toContain('not shared with you');
    const responses = await req(ACCOUNT_KEY, 'POST', '/responses', { model: 'alices', input: 'hi' });
    expect(responses.statusCode).toBe(403);
  });

  it("shares an admin's new agent with everyone", async () => {
    expect(await models(tokens.bob)).toContain('admins');
    expect(await models(ACCOUNT_KEY)).toContain('admins');
    expect((await req(tokens.admin, 'GET', '/agents/admins/audience')).json()).toEqual(AUDIENCE_EVERYONE);
  });

  it('lets the owner share with named users and api accounts, and nobody else change it', async () => {
    expect((await req(tokens.bob, 'GET', '/agents/alices/audience')).statusCode).toBe(403);
    expect((await req(tokens.bob, 'PUT', '/agents/alices/audience', AUDIENCE_EVERYONE)).statusCode).toBe(403);
    const shared = { everyone: false, users: ['bob', 'bob'], roles: [], apiAccounts: ['app'] };
    const put = await req(tokens.alice, 'PUT', '/agents/alices/audience', shared);
    expect(put.statusCode).toBe(200);
    expect(put.json()).toEqual({ everyone: false, users: ['bob'], roles: [], apiAccounts: ['app'] });
    expect(await models(tokens.bob)).toContain('alices');
    expect(await models(ACCOUNT_KEY)).toContain('alices');
    expect((await req(tokens.bob, 'GET', '/models/alices')).statusCode).toBe(200);
    const list = (await req(tokens.alice, 'GET', '/agents')).json() as { data: Array<{ ruleChain: { id: string; audience?: unknown } }> };
    expect(list.data.find((a) => a.ruleChain.id === 'alices')?.ruleChain.audience).toEqual({ everyone: false, users: ['bob'], roles: [], apiAccounts: ['app'] });
    // Others see the agent listed, not whom it is shared with.
    const bobs = (await req(tokens.bob, 'GET', '/agents')).json() as { data: Array<{ ruleChain: { id: string; audience?: unknown } }> };
    expect(bobs.data.find((a) => a.ruleChain.id === 'alices')?.ruleChain.audience).toBeUndefined();
    expect((await req(tokens.alice, 'PUT', '/agents/alices/audience', { everyone: 'yes' })).statusCode).toBe(400);
    expect((await req(tokens.alice, 'PUT', '/agents/alices/audience', { ...AUDIENCE_PRIVATE })).statusCode).toBe(200);
    expect(await models(tokens.bob)).not.toContain('alices');
  });

  it('refuses a cron job on an agent its creator may not chat with', async () => {
    const job = { name: 'c', schedule: '0 0 3 * * *', message: 'read AGENTS.md', target: 'alices' };
    const res = await req(tokens.bob, 'POST', '/cron', job);
    expect(res.statusCode).toBe(403);
    expect((await req(tokens.bob, 'POST', '/agents/alices/cron', job)).statusCode).toBe(403);
    expect((await req(tokens.alice, 'POST', '/cron', job)).statusCode).toBe(201);
    // Shared with bob: he may target it, but not have it speak through its channel accounts.
    await req(tokens.alice, 'PUT', '/agents/alices/audience', { ...AUDIENCE_PRIVATE, users: ['bob'] });
    expect((await req(tokens.bob, 'POST', '/cron', job)).statusCode).toBe(201);
    const deliver = { platform: 'telegram', accountId: 'bot', chatId: '42' };
    const delivering = await req(tokens.bob, 'POST', '/cron', { ...job, deliver });
    expect(delivering.statusCode).toBe(403);
    expect(delivering.body).toContain('only the owner of agent');
    await req(tokens.alice, 'PUT', '/agents/alices/audience', AUDIENCE_PRIVATE);
  });

  it('warns when a save leaves a dangerous power open to everyone', async () => {
    const created = await req(tokens.admin, 'POST', '/agents', withBash('shell'));
    expect(created.statusCode).toBe(201);
    expect(created.headers['warning']).toMatch(/^299 agentry ".*shell.*bash/);
    const updated = await req(tokens.admin, 'PUT', '/agents/shell', withBash('shell'));
    expect(updated.headers['warning']).toContain('bash');
    const narrowed = await req(tokens.admin, 'PUT', '/agents/shell/audience', { everyone: false, users: [], roles: ['admin'], apiAccounts: [] });
    expect(narrowed.headers['warning']).toBeUndefined();
    expect((await req(tokens.admin, 'PUT', '/agents/shell', withBash('shell'))).headers['warning']).toBeUndefined();
    expect((await req(tokens.admin, 'PUT', '/agents/shell/audience', AUDIENCE_EVERYONE)).headers['warning']).toContain('bash');
  });

  it("warns when a save gives an agent a tool its owner may not use (runs leave it out), in the policy's words", async () => {
    expect((await req(tokens.alice, 'POST', '/agents', agentDsl('alices_tools'))).statusCode).toBe(201);
    const saved = await req(tokens.admin, 'PUT', '/agents/alices_tools', withBash('alices_tools'));
    expect(saved.statusCode).toBe(200);
    const warning = String(saved.headers['warning']);
    expect(warning).toMatch(/^299 agentry "agent alices_tools is saved, but its owner may not use all of it, and its runs leave that out: /);
    expect(warning).toContain("the bash tool runs commands on the worker, so only an admin's definition may use it; this definition belongs to alice, who is not an admin");
    // Private to alice: no everyone-warning beside it.
    expect(saved.headers['warning']).not.toContain('shared with everyone');
    // Nothing refused, nothing said.
    expect((await req(tokens.admin, 'PUT', '/agents/alices_tools', agentDsl('alices_tools'))).headers['warning']).toBeUndefined();
  });

  it('names at start-up the agents shared with everyone that hold a dangerous power', async () => {
    const again = await startHarness(YAML, { db: h.runtime.db });
    try {
      const line = again.logs.find((l) => l.includes('hold dangerous powers'));
      expect(line).toBeDefined();
      expect(line).toContain('shell: bash');
      expect(line).not.toContain('alices');
    } finally {
      await again.close();
    }
  });
});

describe('agent audience without requireAuth', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('security:\n  requireAuth: false\n');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('shares every new agent with everyone', async () => {
    expect((await h.app.inject({ method: 'POST', url: '/api/v1/agents', payload: agentDsl('open1') })).statusCode).toBe(201);
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/agents/open1/audience' })).json()).toEqual(AUDIENCE_EVERYONE);
  });
});

/**
 * Issue 35, finding 5: REST cron had no floor on the interval and no cap per user, so one user
 * could have the scheduler fire every second, as often as they liked. A plain user is held as the
 * agent's own `cron` tool holds an agent; admins are not.
 */
describe('cron limits for plain users (security.cronMinIntervalSeconds, cronMaxJobsPerUser)', { timeout: 120_000 }, () => {
  let h: Harness;
  let tokens: Record<'admin' | 'alice', string>;
  const req = (token: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown) =>
    h.app.inject({ method, url: `/api/v1${url}`, headers: bearer(token), ...(payload === undefined ? {} : { payload: payload as object }) });

  beforeAll(async () => {
    h = await startHarness(`${YAML.replace('  requireAuth: true\n', '  requireAuth: true\n  cronMinIntervalSeconds: 300\n  cronMaxJobsPerUser: 2\n')}`);
    tokens = { admin: await login(h.app, 'admin', PASSWORDS.admin), alice: await login(h.app, 'alice', PASSWORDS.alice) };
    expect((await req(tokens.alice, 'POST', '/agents', agentDsl('alices'))).statusCode).toBe(201);
  }, 300_000);
  afterAll(async () => {
    await h?.close();
  });

  it('refuses a schedule that fires more often than the floor, on create and on change; admins are not held', async () => {
    const every = (schedule: string) => ({ name: 'c', schedule, message: 'hi', target: 'alices' });
    const fast = await req(tokens.alice, 'POST', '/cron', every('* * * * * *'));
    expect(fast.statusCode).toBe(400);
    expect(fast.json()).toEqual({ error: expect.stringMatching(/fires every 1 s; your jobs must be at least 300 s apart \(security\.cronMinIntervalSeconds\)/) });
    const ok = await req(tokens.alice, 'POST', '/cron', every('0 */10 * * * *'));
    expect(ok.statusCode).toBe(201);
    const id = (ok.json() as { id: string }).id;
    expect((await req(tokens.alice, 'PUT', `/cron/${id}`, { schedule: '*/5 * * * * *' })).statusCode).toBe(400);
    expect((await req(tokens.admin, 'POST', '/cron', every('* * * * * *'))).statusCode).toBe(201);
  });

  it('caps the jobs a user owns with a 409 naming the limit', async () => {
    const job = { name: 'd', schedule: '0 0 3 * * *', message: 'hi', target: 'alices' };
    // alice owns one from the test above.
    expect((await req(tokens.alice, 'POST', '/cron', job)).statusCode).toBe(201);
    const over = await req(tokens.alice, 'POST', '/cron', job);
    expect(over.statusCode).toBe(409);
    expect(over.json()).toEqual({ error: 'Limit reached: you already own 2 cron jobs (the limit is 2, security.cronMaxJobsPerUser): delete one first' });
    expect((await req(tokens.admin, 'POST', '/cron', job)).statusCode).toBe(201);
  });
});
