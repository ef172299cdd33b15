import Fastify from 'fastify';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { budgetCounter, type Budget } from '@agentry/contracts';
import type { Principal } from '@agentry/gateway';
import { toAppError } from '@agentry/gateway';
import { enforceBudget } from '../src/auth/budget.js';

/**
 * The budget check on its own: what the counter is asked (nothing without a budget; one call per
 * window with one), and what happens when it cannot answer. Budgets through the real chat route
 * are e2e/usage-budgets.test.ts (embedded) and e2e/usage-cluster.test.ts (two gateways, Redis).
 */
function appWith(count: (key: string, by: number, ttlMs: number) => Promise<number>, principal: Principal) {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
  const app = Fastify();
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (req) => {
    req.principal = principal;
  });
  app.setErrorHandler((err, _req, reply) => {
    const e = toAppError(err);
    return reply.status(e.status).send({ error: e.message });
  });
  app.post('/chat', async (req, reply) => {
    await enforceBudget({ count }, logger, req, reply);
    return { ok: true };
  });
  return { app, lines };
}

const account = (budget?: Budget): Principal => ({
  kind: 'account',
  platform: 'api',
  accountId: 'app',
  ...(budget ? { budget } : {}),
});

describe('budget check', () => {
  it('asks nothing for a principal without a budget', async () => {
    let asked = 0;
    const count = async () => (asked++, 0);
    for (const p of [account(), { kind: 'open' } as Principal, { kind: 'user', username: 'u', role: 'user', via: 'jwt' } as Principal]) {
      expect((await appWith(count, p).app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    }
    expect(asked).toBe(0);
  });

  it("reads the day's tokens and counts the minute's request, under the principal's window keys", async () => {
    const asked: Array<[string, number]> = [];
    const { app } = appWith(async (key, by) => (asked.push([key, by]), 0), account({ tokensPerDay: 100, requestsPerMinute: 5 }));
    expect((await app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    expect(asked).toEqual([
      [budgetCounter('tokensPerDay', 'api:app').key, 0],
      [budgetCounter('requestsPerMinute', 'api:app').key, 1],
    ]);
  });

  it('answers 429 naming the spent budget and its reset, with Retry-After, at the limit', async () => {
    const { app } = appWith(async (key) => (key.includes('tokensPerDay') ? 100 : 1), account({ tokensPerDay: 100 }));
    const res = await app.inject({ method: 'POST', url: '/chat' });
    expect(res.statusCode).toBe(429);
    const reset = budgetCounter('tokensPerDay', 'api:app').resetsAt;
    expect((res.json() as { error: string }).error).toBe(
      `Too many requests: the tokensPerDay budget of api:app (100 tokens per day) is spent; it resets at ${reset.toISOString()} (in ${res.headers['retry-after']} s)`,
    );
    expect(Number(res.headers['retry-after'])).toBe(Math.max(1, Math.ceil((reset.getTime() - Date.now()) / 1000)));
    // One under the limit still passes.
    const under = appWith(async () => 99, account({ tokensPerDay: 100 }));
    expect((await under.app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
  });

  it('lets requests through when the counter cannot answer, with a warning', async () => {
    const { app, lines } = appWith(async () => Promise.reject(new Error('Redis is not connected')), account({ requestsPerMinute: 1 }));
    expect((await app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual(['budgets are not enforced: their counter (the bus) does not answer']);
  });
});
