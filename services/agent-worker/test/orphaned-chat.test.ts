import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { createRedisBus } from '@agentry/bus/redis';
import { PubSubChannels, RunKeeps } from '@agentry/contracts';
import { ensureSession, getRun, insertRuleChain, insertRun, listSessionMessages, type DbHandle, type RunSource } from '@agentry/db';
import { type ModelCallRequest, type ModelEvent } from '@agentry/engine';
import { enqueueRun } from '@agentry/runs';
import { bootstrap, type Runtime } from '@agentry/runtime';
import {
  cleanupRedisPrefix,
  createTestDatabase,
  createTestPglite,
  describeWithRedis,
  redisUrl,
  uniqueRedisPrefix,
  waitFor,
  type TestDatabase,
} from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';

/**
 * Issue 20 finding 11: a chat run queued when the server died came back after the restart (the
 * sweep in embedded mode, the job kept in Redis in cluster mode), was answered for nobody and
 * committed into the session; the user's retry then added a second turn. Runs are created here
 * as the dead gateway left them, and only then does a worker start.
 */
function orphanSuite(open: { bus: (logger: Logger) => Bus; db: () => Promise<DbHandle>; enqueue: boolean; cleanup?: () => Promise<void> }) {
  let runtime: Runtime;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-orphan-'));
  const asked: string[] = [];
  async function* fakeStream(req: ModelCallRequest): AsyncIterable<ModelEvent> {
    const question = String(req.messages.at(-1)!.content);
    asked.push(question);
    yield { type: 'text', text: `answer to ${question}` };
    yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
  }
  const runs: Record<'orphan' | 'orphanNoSession' | 'orphanReply' | 'waited' | 'waitedReply' | 'cron' | 'channel' | 'background', string> = {
    orphan: 'orphan-chat-in-session',
    orphanReply: 'orphan-chat-of-a-dead-gateway',
    waitedReply: 'chat-its-gateway-still-waits-for',
    orphanNoSession: 'orphan-chat-alone',
    waited: 'chat-still-waited-for',
    cron: 'cron-fire-before-restart',
    channel: 'channel-message-before-restart',
    background: 'background-response-nobody-reads',
  };
  /** The reply channels of the chats a gateway submitted (the row's `reply_to`, and the job's in cluster mode: agent-run v3). */
  const replyTo: Partial<Record<string, string>> = { [runs.orphanReply]: 'dead-gateway', [runs.waitedReply]: 'live-gateway' };
  let sessionId: string;
  let unlisten: () => Promise<void>;
  let unlistenReplies: () => Promise<void>;

  beforeAll(async () => {
    fs.writeFileSync(path.join(cwd, 'config.yaml'), 'worker: {stall_timeout_ms: 1000}\nreliability: {listener_check_ms: 50, run_sweep_ms: 500}\n');
    runtime = await bootstrap({
      service: 'orphan-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'orphan-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: () => {} },
      openDb: open.db,
      openBus: open.bus,
    });
    const db = runtime.db.db;
    await insertRuleChain(db, {
      id: 'w',
      kind: 'agent',
      agentId: null,
      name: 'W',
      category: null,
      dsl: { ruleChain: { id: 'w', name: 'W' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p' } }], connections: [] } },
    });
    sessionId = (await ensureSession(db, { agentId: 'w', sessionKey: 'the-user', channel: 'api' })).id;
    // Every run streamed (the waited one's events are then kept for a resume; only a chat's are).
    const add = (id: string, source: RunSource, inSession: boolean) =>
      insertRun(db, { id, agentId: 'w', sessionId: inSession ? sessionId : null, source, request: { messages: [{ role: 'user', content: id }], stream: true }, replyTo: replyTo[id] ?? null });
    await add(runs.orphan, 'api', true);
    await add(runs.orphanNoSession, 'api', false);
    await add(runs.orphanReply, 'api', false);
    await add(runs.waited, 'api', false);
    await add(runs.waitedReply, 'api', false);
    await add(runs.cron, 'cron', false);
    await add(runs.channel, 'chat_d', false);
    // A Responses `background: true` run: it lives without its client, whose gateway died too.
    await insertRun(db, { id: runs.background, agentId: 'w', sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: runs.background }], stream: true, background: true } });
    // Created before the restart, long enough ago for the sweep to take them.
    await sql`update runs set created_at = now() - interval '1 hour'`.execute(db);
    // One client is still there (another gateway's): its run must be answered.
    unlisten = await runtime.bus.pubsub.subscribe(PubSubChannels.run(runs.waited), () => {});
    unlistenReplies = await runtime.bus.pubsub.subscribe(PubSubChannels.replies('live-gateway'), () => {});
    if (open.enqueue) for (const id of Object.values(runs)) await enqueueRun(runtime.bus.queue, id, { replyTo: replyTo[id] });
    await startAgentWorker(runtime, { stream: fakeStream });
    await waitFor(
      async () => {
        for (const id of Object.values(runs)) if (['queued', 'running'].includes((await getRun(db, id))!.status)) return false;
        return true;
      },
      20_000,
      50,
    );
  }, 60_000);
  afterAll(async () => {
    await unlisten?.();
    await unlistenReplies?.();
    await runtime?.lifecycle.shutdown('test');
    await open.cleanup?.();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('a chat run whose client left before it started is cancelled, never answered', async () => {
    for (const id of [runs.orphan, runs.orphanNoSession, runs.orphanReply]) {
      expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'cancelled', error: 'the client was gone before the run started', output: null });
    }
    expect(asked).not.toContain(runs.orphan);
    expect(asked).not.toContain(runs.orphanNoSession);
    expect(asked).not.toContain(runs.orphanReply);
  });

  it('nothing is committed into the session: a retry is the only turn', async () => {
    expect(await listSessionMessages(runtime.db.db, sessionId)).toEqual([]);
  });

  it('a chat run someone still waits for, cron fires and channel messages run after the restart', async () => {
    for (const id of [runs.waited, runs.waitedReply, runs.cron, runs.channel]) {
      expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: `answer to ${id}` });
    }
  });

  it('a background response nobody listens for is answered, its events kept for a later reader', async () => {
    expect(await getRun(runtime.db.db, runs.background)).toMatchObject({ status: 'succeeded', output: `answer to ${runs.background}` });
    const kept = (await runtime.bus.pubsub.kept(RunKeeps.events(runs.background))) as Array<{ type: string; seq: number }>;
    expect(kept.map((e) => [e.type, e.seq])).toEqual([
      ['text', 0],
      ['done', 1],
    ]);
  });

  it("keeps a chat run's events for a client that resumes its stream, and only a chat's", async () => {
    const kept = (await runtime.bus.pubsub.kept(RunKeeps.events(runs.waited))) as Array<{ type: string; seq: number; runId: string }>;
    expect(kept.map((e) => [e.type, e.seq, e.runId])).toEqual([
      ['text', 0, runs.waited],
      ['done', 1, runs.waited],
    ]);
    expect(await runtime.bus.pubsub.kept(RunKeeps.events(runs.cron))).toEqual([]);
    expect(await runtime.bus.pubsub.kept(RunKeeps.events(runs.channel))).toEqual([]);
  });
}

describe('chat runs orphaned by a restart (embedded: PGlite, in-process bus, the sweep)', () => {
  orphanSuite({ bus: (logger) => createMemoryBus({ logger }), db: () => createTestPglite(), enqueue: false });
});

describeWithRedis('chat runs orphaned by a restart (cluster: Postgres, Redis, the surviving jobs)', () => {
  const prefix = uniqueRedisPrefix();
  let test: TestDatabase | undefined;
  orphanSuite({
    bus: (logger) => createRedisBus({ url: redisUrl(), prefix, logger }),
    db: async () => {
      test = await createTestDatabase();
      return test.handle;
    },
    enqueue: true,
    cleanup: async () => {
      await test?.drop();
      await cleanupRedisPrefix(redisUrl(), prefix);
    },
  });
});
