import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl, ruleDsl } from './resources-harness.js';

/**
 * An agent's local skills and agent-level rules follow its workspace rule (issue 35, finding 6):
 * only its owner and admins read them; another user gets the workspace routes' 403.
 */

const PASSWORDS = { admin: 'admin-pass-1234', alice: 'alice-pass-1234', bob: 'bob-pass-1234' };
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
`;

describe("another user's agent skills and rules", { timeout: 120_000 }, () => {
  let h: Harness;
  let tokens: Record<'admin' | 'alice' | 'bob', string>;
  let ruleId: string;
  const req = (token: string, method: 'GET' | 'POST', url: string, payload?: unknown) =>
    h.app.inject({ method, url: `/api/v1${url}`, headers: bearer(token), ...(payload === undefined ? {} : { payload: payload as object }) });

  beforeAll(async () => {
    h = await startHarness(YAML);
    tokens = { admin: await login(h.app, 'admin', PASSWORDS.admin), alice: await login(h.app, 'alice', PASSWORDS.alice), bob: await login(h.app, 'bob', PASSWORDS.bob) };
    expect((await req(tokens.alice, 'POST', '/agents', agentDsl('private_a'))).statusCode).toBe(201);
    expect((await req(tokens.alice, 'POST', '/agents/private_a/skills', { name: 'diary', description: 'd', content: 'secret plans' })).statusCode).toBe(201);
    const rule = await req(tokens.alice, 'POST', '/agents/private_a/rules', ruleDsl('private_rule'));
    expect(rule.statusCode, rule.body).toBe(201);
    ruleId = (rule.json() as { ruleChain?: { id: string }; id?: string }).ruleChain?.id ?? 'private_rule';
  }, 300_000);
  afterAll(async () => {
    await h?.close();
  });

  it('are refused to another user (403), readable by the owner and admins', async () => {
    const urls = [
      '/agents/private_a/skills/diary',
      '/agents/private_a/skills',
      '/skills/diary?scope=local&agentId=private_a',
      '/skills/diary?agentId=private_a',
      '/skills?agentId=private_a',
      '/agents/private_a/rules',
      `/agents/private_a/rules/${ruleId}`,
    ];
    for (const url of urls) {
      const bob = await req(tokens.bob, 'GET', url);
      expect(bob.statusCode, url).toBe(403);
      expect(bob.body, url).not.toContain('secret plans');
      expect((await req(tokens.alice, 'GET', url)).statusCode, url).toBe(200);
      expect((await req(tokens.admin, 'GET', url)).statusCode, url).toBe(200);
    }
  });

  it('GET /skills without an agent lists global skills and only the local skills of agents the caller owns (admins: all)', async () => {
    expect((await req(tokens.bob, 'POST', '/agents', agentDsl('private_b'))).statusCode).toBe(201);
    expect((await req(tokens.bob, 'POST', '/agents/private_b/skills', { name: 'bobnote', description: 'd', content: 'bob only' })).statusCode).toBe(201);
    expect((await req(tokens.admin, 'POST', '/skills', { name: 'shared', description: 'd', content: 'for all', scope: 'global' })).statusCode).toBe(201);
    const names = async (token: string, url: string) => {
      const res = await req(token, 'GET', url);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { data: Array<{ name: string; agentId?: string }>; total: number };
      expect(body.total).toBe(body.data.length);
      return body.data.map((s) => `${s.agentId ?? 'global'}/${s.name}`).sort();
    };
    for (const url of ['/skills', '/skills?scope=all', '/skills?scope=local']) {
      const all = url.endsWith('local') ? [] : ['global/shared'];
      expect(await names(tokens.bob, url), url).toEqual([...all, 'private_b/bobnote'].sort());
      expect(await names(tokens.alice, url), url).toEqual([...all, 'private_a/diary'].sort());
      expect(await names(tokens.admin, url), url).toEqual([...all, 'private_a/diary', 'private_b/bobnote'].sort());
    }
    expect((await req(tokens.bob, 'GET', '/skills')).body).not.toContain('diary');
  });
});
