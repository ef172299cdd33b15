import fs from 'node:fs';
import http from 'node:http';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { QueueNames } from '@agentry/contracts';
import { finishRun, insertRuleChain } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, waitFor } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

/**
 * A chat whose client leaves while its run is being created (the gateway is still committing the
 * row and subscribing to its reply channel) must not be enqueued: its 'close' came before the
 * gateway listened for it, so nothing would ever cancel the run, and the worker, seeing the
 * gateway's subscription, would answer into the session for nobody.
 */
let runtime: Runtime;
let app: FastifyInstance;
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-client-gone-'));
/** Jobs the stand-in worker was given. */
const taken: string[] = [];
/** Reply-channel subscriptions held back until the test lets them complete. */
const held: Array<{ channel: string; release: () => void }> = [];
/** The bus's own pub/sub, before each case gives the gateway a fresh view of it. */
let basePubSub: Runtime['bus']['pubsub'];

/**
 * A new pub/sub object over the same bus whose reply-channel SUBSCRIBE waits for the test: the
 * gateway subscribes once per pub/sub port (per process), so each case needs its own to catch
 * the gateway in the middle of subscribing.
 */
function holdingPubSub(): Runtime['bus']['pubsub'] {
  return new Proxy(basePubSub, {
    get(target, key) {
      if (key === 'subscribe') {
        return async (channel: string, handler: never) => {
          if (channel.startsWith('replies:')) await new Promise<void>((release) => held.push({ channel, release }));
          return target.subscribe(channel as never, handler);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
const serverSockets: Socket[] = [];

beforeAll(async () => {
  runtime = await bootstrap({
    service: 'client-gone-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'client-gone-master-key-0123456789' },
    cwd,
    logDestination: { write: () => {} },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  basePubSub = runtime.bus.pubsub;
  await insertRuleChain(runtime.db.db, {
    id: 'gone',
    kind: 'agent',
    agentId: null,
    name: 'Gone',
    category: null,
    dsl: { ruleChain: { id: 'gone', name: 'Gone' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent' }], connections: [] } },
  });
  runtime.bus.queue.consume(QueueNames.agentRun, async (job) => {
    // The queue carries forced compactions too: this stand-in runs runs only.
    if (job.data.type !== 'agent-run') throw new Error(`not a run: ${job.data.type}`);
    const { runId } = job.data;
    taken.push(runId);
    await finishRun(runtime.db.db, runId, { status: 'succeeded', output: 'answered for nobody' });
  }, { concurrency: 1 });
  await seedGateway(runtime);
  app = await buildGateway(runtime, { heartbeatMs: 50 });
  app.server.on('connection', (socket: Socket) => serverSockets.push(socket));
  await app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  for (const h of held.splice(0)) h.release();
  await app?.close();
  await runtime?.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

describe('a chat client that leaves before its run is enqueued', () => {
  it.each([false, true])('stream %s: the run is cancelled and never reaches a worker', async (stream) => {
    const address = app.server.address() as { port: number };
    const sessionId = `gone-${String(stream)}`;
    const heldBefore = held.length;
    (runtime.bus as { pubsub: Runtime['bus']['pubsub'] }).pubsub = holdingPubSub();
    const req = http.request({ host: '127.0.0.1', port: address.port, method: 'POST', path: '/api/v1/chat/completions', headers: { 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end(JSON.stringify({ model: 'gone', messages: [{ role: 'user', content: 'are you there?' }], stream, sessionId }));

    // The gateway has committed the run and waits for its subscription: the client leaves now.
    const hold = await waitFor(async () => held[heldBefore], 5_000, 10);
    const run = await waitFor(
      () =>
        runtime.db.db
          .selectFrom('runs')
          .innerJoin('sessions', 'sessions.id', 'runs.session_id')
          .select('runs.id')
          .where('sessions.session_key', '=', sessionId)
          .executeTakeFirst(),
      5_000,
      10,
    );
    const runId = run.id;
    const serverSide = serverSockets.at(-1)!;
    const closed = serverSide.destroyed ? Promise.resolve() : once(serverSide, 'close');
    req.destroy();
    await closed;
    hold.release();

    const row = await waitFor(
      async () => {
        const r = await runtime.db.db.selectFrom('runs').select(['status', 'error']).where('id', '=', runId).executeTakeFirst();
        return r && r.status !== 'queued' && r.status !== 'running' ? r : undefined;
      },
      5_000,
      10,
    );
    expect(row).toEqual({ status: 'cancelled', error: 'the client went away before the run started' });
    expect(taken).not.toContain(runId);
  });
});
