import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, describeWithServers, freePort, redisUrl, spawnService, waitFor, type SpawnedService } from '@agentry/testing';

/**
 * Two gateway replicas in cluster mode share Postgres and Redis: a configuration change made on
 * one is served by the other within a second, without a restart.
 */
describeWithServers('two gateways in cluster mode', () => {
  const gateways: Array<{ svc: SpawnedService; port: number }> = [];
  let drop: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    const prefix = `t-cluster-${Date.now()}`;
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const svc = spawnService('services/gateway/src/main.ts', {
        env: {
          DATABASE_URL: db.url,
          REDIS_URL: redisUrl(),
          REDIS_PREFIX: prefix,
          AGENTRY_SECRET_KEY: 'e2e-master-key-0123456789-abcdefghij',
          PORT: String(port),
          HOST: '127.0.0.1',
        },
      });
      gateways.push({ svc, port });
    }
    await Promise.all(gateways.map((g) => g.svc.waitForLine(/gateway listening/, 40_000)));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.svc.stop()));
    await drop();
  });

  const url = (i: number, p: string) => `http://127.0.0.1:${gateways[i]!.port}${p}`;
  const view = async (i: number) => (await fetch(url(i, '/api/v1/config'))).json() as Promise<{ security: { requireAuth: boolean } }>;

  it('a PUT on one is visible on the other within one second', async () => {
    expect((await view(1)).security.requireAuth).toBe(false);
    const res = await fetch(url(0, '/api/v1/config'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ security: { requireAuth: true } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { security: { requireAuth: boolean } }).security.requireAuth).toBe(true);
    // The other replica now enforces it: management without a JWT is refused there.
    const started = Date.now();
    await waitFor(async () => (await fetch(url(1, '/api/v1/config'))).status === 401, 1000, 20);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('rejects an invalid PUT on either replica without changing anything', async () => {
    const login = await fetch(url(1, '/api/v1/auth/login'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: 'admin' }),
    });
    const { token } = (await login.json()) as { token: string };
    const auth = { authorization: `Bearer ${token}` };
    const res = await fetch(url(1, '/api/v1/config'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ server: { port: 'abc' } }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'Invalid input: server.port: must be integer' });
    const view0 = (await (await fetch(url(0, '/api/v1/config'), { headers: auth })).json()) as { server: { host: string } };
    expect(view0.server.host).toBe('127.0.0.1');
  });
});
