import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Counter, Registry } from 'prom-client';
import { HealthRegistry, startHealthServer, type MetricsAccessConfig } from '@agentry/runtime';

/**
 * The health server of the worker, the scheduler and the connector guards /metrics as the
 * gateway does (issue 35 G): `metrics.token` as a bearer token when set, else the management
 * allow-list (an empty one: every address, as before). /health and /ready stay open.
 */

const TOKEN = 'scrape-token-0123456789-abcdef';

describe('health server /metrics', () => {
  const config: MetricsAccessConfig = { metrics: { token: '' }, security: { allowFrom: { management: [] } } };
  let server: { port: number; close(): Promise<void> };
  let url: string;
  beforeAll(async () => {
    const metrics = new Registry();
    new Counter({ name: 'agentry_test_total', help: 'a test counter', registers: [metrics] });
    const health = new HealthRegistry();
    health.markStarted();
    server = await startHealthServer({ host: '127.0.0.1', port: 0, health, metrics, config: () => config });
    url = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server?.close();
  });
  const scrape = (headers: Record<string, string> = {}) => fetch(`${url}/metrics`, { headers });

  it('without a token or an allow-list: open, as before', async () => {
    config.metrics.token = '';
    config.security.allowFrom.management = [];
    const res = await scrape();
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('agentry_test_total');
  });

  it('without a token: the management allow-list decides on the peer address', async () => {
    config.metrics.token = '';
    config.security.allowFrom.management = ['10.0.0.0/8'];
    const refused = await scrape();
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({ error: 'address 127.0.0.1 is not in security.allowFrom.management (set metrics.token to scrape /metrics from elsewhere)' });
    config.security.allowFrom.management = ['10.0.0.0/8', '127.0.0.1'];
    expect((await scrape()).status).toBe(200);
    config.security.allowFrom.management = [];
  });

  it('with metrics.token: only "Authorization: Bearer <token>" reads it (401 otherwise); /health and /ready stay open', async () => {
    config.metrics.token = TOKEN;
    config.security.allowFrom.management = [];
    const refused: Array<Record<string, string>> = [{}, { authorization: 'Bearer nope-0123456789abcdef' }, { authorization: `Bearer ${TOKEN}0` }, { authorization: TOKEN }];
    for (const headers of refused) {
      const res = await scrape(headers);
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ error: 'send the metrics token (metrics.token) as "Authorization: Bearer <token>" to read /metrics' });
      expect(text).not.toContain(TOKEN);
    }
    const ok = await scrape({ authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('agentry_test_total');
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await fetch(`${url}/ready`)).status).toBe(200);
    config.metrics.token = '';
  });
});
