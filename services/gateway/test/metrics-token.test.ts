import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './auth-harness.js';

/**
 * `metrics.token` (issue 35 G): with it set, the gateway's /metrics answers only a request that
 * sends it as a bearer token (401 otherwise), from any address; the management allow-list, which
 * guards /metrics when no token is set (allow-from.test.ts), does not apply then.
 */

const TOKEN = 'scrape-token-0123456789-abcdef';

describe('metrics.token on the gateway', { timeout: 180_000 }, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(`
security:
  users: {admin: "admin-password-1234"}
  allowFrom: {management: ["10.0.0.0/8"]}
metrics:
  token: "${TOKEN}"
`);
  });
  afterAll(async () => {
    await h?.close();
  });
  const scrape = (headers: Record<string, string>, remoteAddress = '198.51.100.1') => h.app.inject({ method: 'GET', url: '/metrics', headers, remoteAddress });

  it('answers the right bearer token from any address, Prometheus text', async () => {
    for (const address of ['198.51.100.1', '10.1.2.3', '2001:db8::1']) {
      const res = await scrape({ authorization: `Bearer ${TOKEN}` }, address);
      expect(res.statusCode, address).toBe(200);
      expect(res.headers['content-type']).toContain('text/plain');
      expect(res.body).toContain('process_cpu_user_seconds_total');
    }
    expect((await scrape({ authorization: `bearer  ${TOKEN}` })).statusCode).toBe(200);
  });

  it('refuses no token, a wrong one, another scheme, with 401 and a human message that does not echo it', async () => {
    const cases: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token-0123456789' },
      { authorization: `Bearer ${TOKEN}x` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` },
      { authorization: TOKEN },
      { authorization: 'Bearer ' },
    ];
    for (const headers of cases) {
      // An address on the management list does not stand in for the token either.
      for (const address of ['198.51.100.1', '10.1.2.3']) {
        const res = await scrape(headers, address);
        expect(res.statusCode, JSON.stringify(headers)).toBe(401);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.json()).toEqual({ error: expect.stringContaining('send the metrics token (metrics.token) as "Authorization: Bearer <token>"') });
        expect(res.body).not.toContain('agentry_');
        expect(res.body).not.toContain(TOKEN);
      }
    }
  });

  it('leaves /health and /ready open, and never shows the token in GET /config', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/health', remoteAddress: '198.51.100.1' })).statusCode).toBe(200);
    const config = await h.app.inject({ method: 'GET', url: '/api/v1/config', remoteAddress: '10.0.0.1' });
    expect(config.statusCode).toBe(200);
    expect(config.body).not.toContain(TOKEN);
    expect(h.logs.join('\n')).not.toContain(TOKEN);
  });
});
