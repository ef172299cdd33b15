import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overJobCap, shortestGap, tooFrequent } from '@agentry/engine';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

/**
 * REST cron is held to the `cron` tool's limits (issue 35, finding 5): a user could make a job
 * fire every second and create as many as it liked. One implementation serves both doors.
 */

const PASSWORDS = { admin: 'admin-pass-1234', alice: 'alice-pass-1234' };
const YAML = `
security:
  requireAuth: true
  users:
    admin: "${PASSWORDS.admin}"
    alice: "${PASSWORDS.alice}"
  cron:
    minIntervalSeconds: 300
    maxJobsPerUser: 2
models:
  default_provider: p1
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-provider-secret, models: [{name: m1, alias: default}]}
`;

describe('cron limits (shared by the tool and the routes)', () => {
  it('measures the shortest gap between ticks and words a refusal', () => {
    expect(shortestGap('*/3 * * * * *', 'UTC')).toBe(3);
    expect(shortestGap('0 0 9 * * 1-5', 'UTC')).toBeGreaterThanOrEqual(86_400);
    expect(tooFrequent('0 */5 * * * *', 'UTC', 300)).toBeNull();
    expect(tooFrequent('0 */4 * * * *', 'UTC', 300)).toContain('at least 300 s apart');
    expect(overJobCap(1, 2)).toBeNull();
    expect(overJobCap(2, 2)).toContain('the limit is 2');
  });
});

describe('REST cron limits (requireAuth)', { timeout: 120_000 }, () => {
  let h: Harness;
  let tokens: Record<'admin' | 'alice', string>;
  const req = (token: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown) =>
    h.app.inject({ method, url: `/api/v1${url}`, headers: bearer(token), ...(payload === undefined ? {} : { payload: payload as object }) });
  const job = (schedule: string) => ({ target: 'limited', name: 'tick', schedule, message: 'hello' });

  beforeAll(async () => {
    h = await startHarness(YAML);
    tokens = { admin: await login(h.app, 'admin', PASSWORDS.admin), alice: await login(h.app, 'alice', PASSWORDS.alice) };
    expect((await req(tokens.alice, 'POST', '/agents', agentDsl('limited'))).statusCode).toBe(201);
  }, 300_000);
  afterAll(async () => {
    await h?.close();
  });

  it('refuses a schedule firing more often than security.cron.minIntervalSeconds, on create and on update', async () => {
    const fast = await req(tokens.alice, 'POST', '/cron', job('*/3 * * * * *'));
    expect(fast.statusCode).toBe(400);
    expect(fast.body).toContain('at least 300 s apart');
    expect((await req(tokens.alice, 'POST', '/agents/limited/cron', job('0 * * * * *'))).statusCode).toBe(400);
    const ok = await req(tokens.alice, 'POST', '/cron', job('0 */5 * * * *'));
    expect(ok.statusCode).toBe(201);
    const id = (ok.json() as { id: string }).id;
    const faster = await req(tokens.alice, 'PUT', `/cron/${id}`, { schedule: '*/10 * * * * *' });
    expect(faster.statusCode).toBe(400);
    expect(faster.body).toContain('at least 300 s apart');
    // Admins schedule what they need.
    expect((await req(tokens.admin, 'POST', '/cron', job('*/3 * * * * *'))).statusCode).toBe(201);
  });

  it('caps the jobs a user owns at security.cron.maxJobsPerUser', async () => {
    const mine = ((await req(tokens.alice, 'GET', '/cron')).json() as unknown[]).length;
    for (let i = mine; i < 2; i++) expect((await req(tokens.alice, 'POST', '/cron', job('0 0 * * * *'))).statusCode).toBe(201);
    const over = await req(tokens.alice, 'POST', '/cron', job('0 0 * * * *'));
    expect(over.statusCode).toBe(403);
    expect(over.body).toContain('the limit is 2');
    expect((await req(tokens.admin, 'POST', '/cron', job('0 0 * * * *'))).statusCode).toBe(201);
  });
});
