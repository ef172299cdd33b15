import { afterEach, expect, it } from 'vitest';
import { createTestDatabase, freePort, describeWithServers, redisUrl, spawnService, waitFor, type SpawnedService } from '@agentry/testing';

/** Each cluster service starts alone, refuses to start without its backends, and stops cleanly. */
const SERVICES = ['gateway', 'agent-worker', 'scheduler', 'channel-connector'] as const;
const running: SpawnedService[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
});

for (const name of SERVICES) {
  it(`${name} exits at once naming the missing variables`, async () => {
    const svc = spawnService(`services/${name}/src/main.ts`, { env: {} });
    running.push(svc);
    expect(await svc.exited()).toBe(1);
    expect(svc.output().trim()).toBe(
      `agentry ${name}: Configuration error: DATABASE_URL, REDIS_URL and AGENTRY_SECRET_KEY are not set: the ${name} service needs Postgres, Redis and the master key in cluster mode (run \`npm start\` for embedded mode)`,
    );
  });
}

it('names just the one variable that is missing', async () => {
  const svc = spawnService('services/scheduler/src/main.ts', {
    env: { DATABASE_URL: 'postgres://x@127.0.0.1:1/x', AGENTRY_SECRET_KEY: 'k'.repeat(32) },
  });
  running.push(svc);
  expect(await svc.exited()).toBe(1);
  expect(svc.output()).toMatch(/REDIS_URL is not set/);
  expect(svc.output()).not.toMatch(/DATABASE_URL|AGENTRY_SECRET_KEY/);
});

describeWithServers('cluster services against real Postgres and Redis', () => {
  for (const name of SERVICES) {
    it(`${name} starts, reports ready and shuts down on SIGTERM`, async () => {
      const db = await createTestDatabase();
      try {
        const port = await freePort();
        const env = {
          DATABASE_URL: db.url,
          REDIS_URL: redisUrl(),
          AGENTRY_SECRET_KEY: 'e2e-master-key-0123456789-abcdefghij',
          REDIS_PREFIX: `t-${name}-${Date.now()}`,
          PORT: String(port),
          HOST: '127.0.0.1',
          HEALTH_PORT: String(port),
          HEALTH_HOST: '127.0.0.1',
        };
        const svc = spawnService(`services/${name}/src/main.ts`, { env });
        running.push(svc);
        const ready = await waitFor(async () => {
          const res = await fetch(`http://127.0.0.1:${port}/ready`);
          return res.status === 200 ? res.json() : null;
        }, 30_000);
        expect(ready).toMatchObject({ status: 'ready', checks: { database: { ok: true }, redis: { ok: true } } });
        const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(metrics).toMatch(/process_cpu_user_seconds_total\{service="[a-z-]+"\}/);
        expect(await svc.stop('SIGTERM')).toBe(0);
        expect(svc.output()).toMatch(/"clean":true/);
      } finally {
        await db.drop();
      }
    }, 60_000);
  }
});
