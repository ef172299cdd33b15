import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus, type RateLimitRule } from '@agentry/bus';
import { validateConfig, type AgentryConfig } from '@agentry/runtime';
import type { Principal } from '@agentry/gateway';
import { toAppError } from '@agentry/gateway';
import { budgetKey, registerChatRateLimit } from '../src/auth/chat-rate-limit.js';

/**
 * The chat limiter on its own: which budget a request spends, what the bus is asked, the
 * configuration switch, and what happens when the bus cannot answer. The e2e attack suite runs
 * it through the real chat route, on one gateway and across two replicas on Redis.
 */

function appWith(bus: Pick<Bus, 'rateLimit'>, config: AgentryConfig, principal: Principal = { kind: 'anonymous' }) {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
  const app: FastifyInstance = Fastify();
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (req) => {
    req.principal = principal;
  });
  registerChatRateLimit(app, { bus: bus as Bus, config: { current: config } as never, logger });
  app.setErrorHandler((err, _req, reply) => {
    const e = toAppError(err);
    return reply.status(e.status).send({ error: e.message });
  });
  app.post('/chat', { config: { rateLimit: 'chat' } }, async () => ({ ok: true }));
  app.post('/other', async () => ({ ok: true }));
  return { app, lines };
}

const config = (chat: Record<string, number>) => validateConfig({ security: { rateLimit: { chat } } }, 'test');

describe('chat rate limit', { timeout: 10_000 }, () => {
  it('asks the bus with a hashed key and the configured rule; only tagged routes count', async () => {
    const asked: Array<[string, RateLimitRule]> = [];
    const bus = { rateLimit: async (key: string, rule: RateLimitRule) => (asked.push([key, rule]), { allowed: true, remaining: 1, retryAfterMs: 0 }) };
    const principal: Principal = { kind: 'account', platform: 'api', accountId: 'app1' };
    const { app } = appWith(bus, config({ requests: 30, windowSeconds: 60, burst: 5 }), principal);
    expect((await app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/other' })).statusCode).toBe(200);
    expect(asked).toEqual([[`chat:${budgetKey(principal, '127.0.0.1')}`, { limit: 30, windowMs: 60_000, burst: 5 }]]);
    expect(asked[0]![0]).toMatch(/^chat:[A-Za-z0-9_-]{32}$/);
    expect(asked[0]![0]).not.toContain('app1');
  });

  it('answers 429 {error} with Retry-After rounded up to whole seconds', async () => {
    const bus = { rateLimit: async () => ({ allowed: false, remaining: 0, retryAfterMs: 1_200 }) };
    const { app } = appWith(bus, config({ requests: 2, windowSeconds: 10 }));
    const res = await app.inject({ method: 'POST', url: '/chat' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('2');
    expect(res.json()).toEqual({ error: 'Too many requests: this credential sent more than 2 chat requests in 10 s; try again in 2 s' });
  });

  it('one budget per user (JWT or API key alike), per account, and per address for anonymous callers', () => {
    const jwt = budgetKey({ kind: 'user', username: 'bob', role: 'user', via: 'jwt' }, '10.0.0.1');
    expect(budgetKey({ kind: 'user', username: 'bob', role: 'user', via: 'apiKey' }, '10.0.0.2')).toBe(jwt);
    expect(budgetKey({ kind: 'user', username: 'carol', role: 'user', via: 'jwt' }, '10.0.0.1')).not.toBe(jwt);
    expect(budgetKey({ kind: 'account', platform: 'api', accountId: 'bob' }, '10.0.0.1')).not.toBe(jwt);
    expect(budgetKey({ kind: 'anonymous' }, '10.0.0.1')).not.toBe(budgetKey({ kind: 'anonymous' }, '10.0.0.2'));
  });

  it('is off with requests: 0 (the bus is not asked)', async () => {
    let asked = 0;
    const bus = { rateLimit: async () => (asked++, { allowed: false, remaining: 0, retryAfterMs: 1000 }) };
    const { app } = appWith(bus, config({ requests: 0 }));
    expect((await app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    expect(asked).toBe(0);
  });

  it('lets requests through when the bus cannot answer, warning once rather than per request', async () => {
    const bus = { rateLimit: async () => Promise.reject(new Error('Redis is not connected')) };
    const { app, lines } = appWith(bus, config({ requests: 1 }));
    for (let i = 0; i < 3; i++) expect((await app.inject({ method: 'POST', url: '/chat' })).statusCode).toBe(200);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings.map((l) => l.msg)).toEqual(['the chat rate limit is not enforced: its counter (the bus) does not answer']);
  });

  it('with the in-process bus, the burst passes and the next request is refused', async () => {
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    try {
      const { app } = appWith(bus, config({ requests: 3, windowSeconds: 60 }), { kind: 'user', username: 'u', role: 'user', via: 'jwt' });
      const codes = [];
      for (let i = 0; i < 4; i++) codes.push((await app.inject({ method: 'POST', url: '/chat' })).statusCode);
      expect(codes).toEqual([200, 200, 200, 429]);
    } finally {
      await bus.close();
    }
  });
});
