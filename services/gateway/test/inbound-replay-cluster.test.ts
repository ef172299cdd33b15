import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestDatabase, describeWithServers, redisUrl, startFakeDingTalk, uniqueRedisPrefix } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { MASTER_KEY } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

/**
 * Issue 20 finding 9 across replicas (cluster mode, real Postgres and Redis): a DingTalk (timestamp,
 * sign) pair accepted by one gateway is refused by the other, whatever body it carries, and an
 * unknown account answers both like a known one with a bad signature.
 */
describeWithServers('inbound replay across two gateway replicas', () => {
  const replicas: Array<{ runtime: Runtime; app: FastifyInstance }> = [];
  let drop: () => Promise<void> = async () => {};
  let ding: Awaited<ReturnType<typeof startFakeDingTalk>>;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-replay-cluster-'));

  beforeAll(async () => {
    ding = await startFakeDingTalk();
    const db = await createTestDatabase();
    await db.handle.close();
    drop = db.drop;
    const env = { DATABASE_URL: db.url, REDIS_URL: redisUrl(), REDIS_PREFIX: uniqueRedisPrefix(), AGENTRY_SECRET_KEY: MASTER_KEY };
    for (let i = 0; i < 2; i++) {
      const runtime = await bootstrap({ service: `gw${i}`, mode: 'cluster', argv: [], env, cwd, logDestination: { write: () => {} } });
      await seedGateway(runtime);
      const app = await buildGateway(runtime);
      await app.ready();
      replicas.push({ runtime, app });
    }
    const first = replicas[0]!.app;
    expect((await first.inject({ method: 'POST', url: '/api/v1/agents', payload: agentDsl('dt_agent') })).statusCode).toBe(201);
    const account = await first.inject({ method: 'POST', url: '/api/v1/channels/chat_b/accounts', payload: { id: 'dt', ...ding.account, binding: { agentId: 'dt_agent' } } });
    expect(account.statusCode).toBe(201);
  }, 60_000);

  afterAll(async () => {
    for (const r of replicas) {
      await r.app.close();
      await r.runtime.lifecycle.shutdown('test');
    }
    await ding?.close();
    await drop();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  const post = (i: number, account: string, delivery: { headers: Record<string, string>; body: string }) =>
    replicas[i]!.app.inject({ method: 'POST', url: `/api/v1/channels/chat_b/accounts/${account}/events`, headers: delivery.headers, payload: delivery.body });
  const msg = (msgId: string, content: string) => ({ msgtype: 'text', text: { content }, msgId, conversationType: '1', senderStaffId: 'staff-1' });

  it('a sign accepted by one replica is refused by the other, with any body', async () => {
    const first = ding.inboundRaw(msg('m-1', 'hello'));
    expect((await post(0, 'dt', first)).statusCode).toBe(200);
    const replay = await post(1, 'dt', { headers: first.headers, body: JSON.stringify(msg('m-2', 'forged')) });
    expect(replay.statusCode).toBe(401);
    expect(replay.json()).toEqual({ error: expect.stringMatching(/this signature was used already/) });
    const runs = await replicas[1]!.runtime.db.db.selectFrom('runs').select('request').where('source', '=', 'chat_b').execute();
    expect(JSON.stringify(runs)).not.toContain('forged');
  });

  it('an unknown account answers exactly like a known one with a bad signature, on either replica', async () => {
    const event = ding.inboundRaw(msg('m-3', 'probe'));
    const forged = { headers: { ...event.headers, sign: Buffer.alloc(32, 7).toString('base64') }, body: event.body };
    for (const i of [0, 1]) {
      const known = await post(i, 'dt', forged);
      const unknown = await post(i, 'nobody', forged);
      expect(known.statusCode).toBe(401);
      expect([unknown.statusCode, unknown.body]).toEqual([known.statusCode, known.body]);
    }
  });
});
