import { afterAll, beforeAll, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestDatabase, describeWithServers, redisUrl, uniqueRedisPrefix, waitFor } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { bearer, login, MASTER_KEY } from './auth-harness.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Two gateway replicas in cluster mode (real Postgres and Redis): a key regenerated on one stops
 * working on the other within a second, and a JWT from one is accepted by the other.
 */
describeWithServers('auth across two replicas', () => {
  const replicas: Array<{ runtime: Runtime; app: FastifyInstance }> = [];
  let drop: () => Promise<void> = async () => {};
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-auth-cluster-'));
  const oldKey = 'sk-dave-original-key-0123456789';

  beforeAll(async () => {
    const db = await createTestDatabase();
    await db.handle.close();
    drop = db.drop;
    fs.writeFileSync(path.join(cwd, 'config.yaml'), `security:\n  users:\n    admin: admin-password\n    dave: "dave-password:${oldKey}"\n`);
    const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl(), REDIS_PREFIX: uniqueRedisPrefix(), AGENTRY_SECRET_KEY: MASTER_KEY };
    for (let i = 0; i < 2; i++) {
      const runtime = await bootstrap({ service: `gw${i}`, mode: 'cluster', argv: [], env, cwd, logDestination: { write: () => {} } });
      await seedGateway(runtime);
      const app = await buildGateway(runtime);
      app.post('/api/v1/test-chat', { config: { access: 'chat' } }, async (req) => ({ principal: req.principal }));
      await app.ready();
      replicas.push({ runtime, app });
    }
  }, 60_000);

  afterAll(async () => {
    for (const r of replicas) {
      await r.app.close();
      await r.runtime.lifecycle.shutdown('test');
    }
    await drop();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  const chat = (i: number, key: string) => replicas[i]!.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(key), payload: {} });

  it('a regenerated key revokes the old one on the other replica within a second', async () => {
    expect((await chat(1, oldKey)).statusCode).toBe(200);
    const token = await login(replicas[0]!.app, 'dave', 'dave-password');
    const res = await replicas[0]!.app.inject({ method: 'POST', url: '/api/v1/auth/api-key', headers: bearer(token) });
    const { apiKey } = res.json() as { apiKey: string };
    const started = Date.now();
    await waitFor(async () => (await chat(1, oldKey)).statusCode === 401, 1000, 20);
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await chat(1, apiKey)).statusCode).toBe(200);
  });

  it('a JWT signed by one replica is accepted by the other', async () => {
    const token = await login(replicas[0]!.app, 'admin', 'admin-password');
    expect((await replicas[1]!.app.inject({ method: 'GET', url: '/api/v1/auth/api-key', headers: bearer(token) })).statusCode).toBe(200);
  });

  it('a user disabled on one replica loses its JWT and API key on the other', async () => {
    const admin = await login(replicas[0]!.app, 'admin', 'admin-password');
    const create = { username: 'erin', password: 'erin-password', role: 'user' };
    expect((await replicas[0]!.app.inject({ method: 'POST', url: '/api/v1/users', headers: bearer(admin), payload: create })).statusCode).toBe(201);
    const erin = await login(replicas[1]!.app, 'erin', 'erin-password');
    const keyRes = await replicas[1]!.app.inject({ method: 'POST', url: '/api/v1/auth/api-key', headers: bearer(erin) });
    const { apiKey } = keyRes.json() as { apiKey: string };
    const ownKey = () => replicas[1]!.app.inject({ method: 'GET', url: '/api/v1/auth/api-key', headers: bearer(erin) });
    await waitFor(async () => (await chat(0, apiKey)).statusCode === 200, 5000, 20);
    expect((await ownKey()).statusCode).toBe(200);

    const disabled = await replicas[0]!.app.inject({ method: 'PUT', url: '/api/v1/users/erin', headers: bearer(admin), payload: { disabled: true } });
    expect(disabled.statusCode).toBe(200);
    await waitFor(async () => (await ownKey()).statusCode === 401 && (await chat(1, apiKey)).statusCode === 401, 5000, 20);
    expect((await replicas[1]!.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'erin', password: 'erin-password' } })).statusCode).toBe(403);
  });
});

/**
 * Two gateways starting at the same moment on one fresh database import the file's users once:
 * each import bumps the user's token version, so a second import (the race before the seed took
 * a lock) logged a session on the first gateway out.
 */
describeWithServers('two gateways seeding at once', () => {
  it('import each user once, so a login on one is not revoked by the other starting', async () => {
    const db = await createTestDatabase();
    await db.handle.close();
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-seed-race-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), 'security:\n  users:\n    admin: admin-password\n    erin: erin-password\n');
    const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl(), REDIS_PREFIX: uniqueRedisPrefix(), AGENTRY_SECRET_KEY: MASTER_KEY };
    const logs: string[] = [];
    const started = await Promise.all(
      [0, 1].map(async (i) => {
        const runtime = await bootstrap({ service: `seed${i}`, mode: 'cluster', argv: [], env, cwd, logDestination: { write: (l: string) => void logs.push(l) } });
        await seedGateway(runtime);
        const app = await buildGateway(runtime);
        await app.ready();
        return { runtime, app };
      }),
    );
    try {
      const imports = logs.filter((l) => /user (created|updated) from the configuration file/.test(l));
      expect(imports.length).toBe(2);
      const token = await login(started[0]!.app, 'erin', 'erin-password');
      const me = await started[1]!.app.inject({ method: 'GET', url: '/api/v1/auth/api-key', headers: bearer(token) });
      expect(me.statusCode).toBe(200);
    } finally {
      for (const r of started) {
        await r.app.close();
        await r.runtime.lifecycle.shutdown('test');
      }
      await db.drop();
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  }, 60_000);
});
