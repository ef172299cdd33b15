import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithServers, startTestCluster, waitFor, type TestCluster } from '@agentry/testing';

/**
 * security.allowFrom in cluster mode: two gateway processes on one Postgres and Redis. A list
 * changed through PUT /config on one gateway applies on the other (the config invalidation),
 * over real sockets from 127.0.0.1.
 */
describeWithServers('security.allowFrom across two gateways', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster({ gateways: 2, workers: 0, configLines: ['security: {requireAuth: false}'] });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  const allowFrom = async (gateway: number) => ((await (await call(gateway, 'GET', '/config')).json()) as { security: { allowFrom: unknown } }).security.allowFrom;
  const call = (gateway: number, method: string, path: string, body?: unknown) =>
    fetch(`${cluster.local.gatewayUrls[gateway]}/api/v1${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });

  it('a list put on one gateway refuses on the other, and opening it again lets in', { timeout: 60_000 }, async () => {
    expect((await call(1, 'GET', '/models')).status).toBe(200);

    const put = await call(0, 'PUT', '/config', { security: { allowFrom: { chat: ['10.0.0.0/8'] } } });
    expect(put.status).toBe(200);
    await waitFor(async () => (await call(1, 'GET', '/models')).status === 403, 10_000, 50);
    const refused = await call(1, 'GET', '/models');
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/^Not allowed: address (::ffff:)?127\.0\.0\.1 is not in security\.allowFrom\.chat$/);
    expect(await allowFrom(1)).toEqual({ management: [], chat: ['10.0.0.0/8'] });

    // The lock-out guard on a real socket: the caller is 127.0.0.1.
    const lockout = await call(1, 'PUT', '/config', { security: { allowFrom: { management: ['10.0.0.0/8'] } } });
    expect(lockout.status).toBe(400);
    expect(((await lockout.json()) as { error: string }).error).toContain('would lock you out');

    expect((await call(1, 'PUT', '/config', { security: { allowFrom: { chat: [], management: ['127.0.0.0/8', '::1'] } } })).status).toBe(200);
    await waitFor(async () => (await call(0, 'GET', '/models')).status === 200, 10_000, 50);
    expect(await allowFrom(0)).toEqual({ management: ['127.0.0.0/8', '::1'], chat: [] });
  });
});
