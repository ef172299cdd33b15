import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { describeWithRedis, redisUrl } from '@agentry/testing';
import { cleanupRedisPrefix, uniqueRedisPrefix } from '@agentry/testing';
import type { CronFire } from '../src/index.js';
import { createRedisBus } from '../src/redis/bus.js';
import { runBusContract, type TestBus, type TestChannels, type TestQueues } from './contract.js';
import { captureLogger, sleep, waitFor } from './helpers.js';

/**
 * Redis commands one job's life may cost (docs/benchmarks.md, "Issue 39: per-run budgets" and
 * "Issue 39: a run's job without BullMQ's deduplication key"). 68 with the deduplication key and
 * the kept completed job.
 */
const JOB_LIFE_BUDGET = 62;

describeWithRedis('redis bus', () => {
  const prefixes: string[] = [];
  const buses: TestBus[] = [];

  /** Every test gets its own prefix; `prefix` lets a test open a second bus on the same one. */
  function open(prefix = uniqueRedisPrefix(), batchFrames?: boolean): TestBus {
    prefixes.push(prefix);
    const bus = createRedisBus<TestQueues, TestChannels>({ url: redisUrl(), prefix, logger: captureLogger().logger, ...(batchFrames === undefined ? {} : { batchFrames }) });
    buses.push(bus);
    return bus;
  }

  afterEach(async () => {
    await Promise.all(buses.splice(0).map((b) => b.close()));
    await Promise.all(prefixes.splice(0).map((p) => cleanupRedisPrefix(redisUrl(), p)));
  });

  runBusContract('redis', async ({ logger }) => {
    const prefix = uniqueRedisPrefix();
    prefixes.push(prefix);
    return createRedisBus<TestQueues, TestChannels>({ url: redisUrl(), prefix, logger });
  });

  describe('redis specifics', () => {
    it('runs its Lua commands inside an auto-pipeline opened earlier in the same tick (the worker crash)', async () => {
      // A plain publish opens the producer's auto-pipeline; a kept publish and a rate-limit hit
      // issued in the same tick join it. When the commands were defined lazily on first use, the
      // open pipeline lacked them: "pipeline[functionName] is not a function", then an uncaught
      // "results[i] is not iterable" that killed the process.
      const bus = open();
      await bus.pubsub.publish('ch', 'before anyone listens');
      const heard: unknown[] = [];
      await bus.pubsub.subscribe('ch', (m) => heard.push(m));
      const work: Array<Promise<unknown>> = [];
      for (let i = 0; i < 20; i++) {
        work.push(bus.pubsub.publish('ch', `plain ${i}`));
        work.push(bus.pubsub.publish('ch', `kept ${i}`, { log: 'race', maxLen: 100, ttlMs: 10_000 }));
        work.push(bus.rateLimit(`race:${i}`, { limit: 10, windowMs: 1_000 }));
      }
      await Promise.all(work);
      await waitFor('all 40 messages', () => heard.length === 40);
      expect(await bus.pubsub.kept('race')).toEqual(Array.from({ length: 20 }, (_, i) => `kept ${i}`));
    });

    it("creates BullMQ's first queues in a tick whose auto-pipeline is already open", async () => {
      // BullMQ defines its own Lua commands on the shared producer when a Queue is first made
      // (lazily, at the first enqueue). It is safe only because BullMQ's version check (an INFO
      // round trip) separates that define from the first script call; this pins that, should an
      // upgrade drop it, for the same crash as the kept publish.
      const bus = open();
      await bus.ping();
      const work: Array<Promise<unknown>> = [];
      for (let i = 0; i < 10; i++) {
        work.push(bus.pubsub.publish('ch', `plain ${i}`));
        work.push(bus.queue.enqueue('q', { n: i }));
        work.push(bus.queue.enqueue('other', i));
        work.push(bus.pubsub.publish('ch', `kept ${i}`, { log: 'race', maxLen: 100, ttlMs: 10_000 }));
      }
      await Promise.all(work);
      expect((await bus.queue.counts('q')).waiting).toBe(10);
      expect((await bus.queue.counts('other')).waiting).toBe(10);
    });

    it('a pub/sub handler that throws is logged with the run id its message names, and the others still hear it', async () => {
      const prefix = uniqueRedisPrefix();
      prefixes.push(prefix);
      const { logger, lines } = captureLogger();
      const bus = createRedisBus<TestQueues, TestChannels>({ url: redisUrl(), prefix, logger });
      buses.push(bus);
      const heard: unknown[] = [];
      await bus.pubsub.subscribe('ch', () => {
        throw new Error('handler bug');
      });
      await bus.pubsub.subscribe('ch', (m) => heard.push(m));
      await bus.pubsub.publish('ch', { runId: 'run-42', type: 'text' });
      await waitFor('the second handler', () => heard.length === 1);
      const line = lines.find((l) => l.msg === 'pub/sub handler threw');
      expect(line).toMatchObject({ runId: 'run-42', err: { message: 'handler bug' } });
    });

    describe("issue 39's per-run budget of Redis commands (counted under MONITOR, never timed)", () => {
      /**
       * The commands whose arguments name `prefix` (BullMQ's and our scripts' inner commands
       * included, as INFO commandstats counts them) while `fn` runs. A marker command ends the
       * window: MONITOR reports in execution order, so once it shows, everything before it has.
       */
      async function commandsOf(prefix: string, fn: () => Promise<void>): Promise<string[]> {
        const monitor = await new Redis(redisUrl()).monitor();
        const marker = `${prefix}:end-of-window`;
        const lines: string[] = [];
        let ended = false;
        monitor.on('monitor', (_time: string, args: string[]) => {
          if (args.includes(marker)) ended = true;
          else if (!ended && args.some((a) => a.includes(prefix))) lines.push(args.join(' '));
        });
        try {
          await fn();
          const probe = new Redis(redisUrl());
          await probe.echo(marker);
          probe.disconnect();
          await waitFor('the end of the window', () => ended);
        } finally {
          monitor.disconnect();
        }
        return lines;
      }

      it("a run's claim of its lease is one command and a token count three (the script, not MULTI/EXEC)", async () => {
        const prefix = uniqueRedisPrefix();
        const bus = open(prefix);
        await bus.ping();
        const claim = await commandsOf(prefix, async () => void expect(await bus.lease('run-1', 'me', 3_000)).toBe(true));
        expect(claim).toEqual([expect.stringMatching(/^set \S+lease:run-1 me PX 3000 NX$/i)]);
        const counted = await commandsOf(prefix, async () => void expect(await bus.count('tokens', 58, 60_000)).toBe(58));
        expect(counted).toHaveLength(3);
        // What the fast path must not break: a renewal by the holder, a refusal to anyone else.
        expect(await bus.lease('run-1', 'me', 3_000)).toBe(true);
        expect(await bus.lease('run-1', 'other', 3_000)).toBe(false);
      });

      it('publishes that come while one is in flight on their channel leave together: one script, one PUBLISH', async () => {
        // What a worker relaying many paced streams to one gateway does: every run's next token
        // on the gateway's reply channel, most of them kept for a resume.
        const prefix = uniqueRedisPrefix();
        const worker = open(prefix);
        const gateway = open(prefix);
        const heard: unknown[] = [];
        await gateway.pubsub.subscribe('ch', (m) => heard.push(m));
        const keep = (run: number) => ({ log: `run-${run}`, maxLen: 4, ttlMs: 60_000 });
        const sent = Array.from({ length: 31 }, (_, i) => ({ run: i % 3, i }));
        // Both scripts loaded first: a script's first call on a server is an EVAL, not an EVALSHA.
        await Promise.all([0, 1, 2].map((i) => worker.pubsub.publish('silent', i, keep(9))));
        const lines = await commandsOf(prefix, async () => {
          // The first finds the channel idle and goes at once; the other 30 come while it is in flight.
          await Promise.all(sent.map((m) => worker.pubsub.publish('ch', m, m.run === 2 ? undefined : keep(m.run))));
          await waitFor('every message', () => heard.length === sent.length);
        });
        // One by one, these were 31 scripts or PUBLISHes, each its own message to the gateway.
        expect(lines.filter((l) => /^publish /i.test(l))).toHaveLength(2);
        expect(lines.filter((l) => /^evalsha /i.test(l))).toHaveLength(2);
        expect(heard).toEqual(sent);
        // Each log has its own messages, capped, with its lifetime set (once per batch).
        expect(await worker.pubsub.kept('run-0')).toEqual(sent.filter((m) => m.run === 0).slice(-4));
        expect(await worker.pubsub.kept('run-1')).toEqual(sent.filter((m) => m.run === 1).slice(-4));
        expect(await worker.pubsub.kept('run-2')).toEqual([]);
        expect(lines.filter((l) => /^pexpire /i.test(l))).toHaveLength(3);
      });

      it('with batchFrames off (reliability.rolling_upgrade) every message is its own PUBLISH or script, in order', async () => {
        // What a gateway of a release before the frames can read: one message a PUBLISH.
        const prefix = uniqueRedisPrefix();
        const worker = open(prefix, false);
        const gateway = open(prefix);
        const raw: string[] = [];
        await gateway.pubsub.subscribe('ch', () => undefined);
        const reader = new Redis(redisUrl());
        try {
          await reader.subscribe(`${prefix}:ch`);
          reader.on('message', (_channel: string, text: string) => raw.push(text));
          const sent = Array.from({ length: 12 }, (_, i) => ({ i }));
          await worker.pubsub.publish('silent', 0, { log: 'run-9', maxLen: 4, ttlMs: 60_000 });
          const lines = await commandsOf(prefix, async () => {
            await Promise.all(sent.map((m) => worker.pubsub.publish('ch', m, m.i % 2 === 0 ? { log: 'run-0', maxLen: 20, ttlMs: 60_000 } : undefined)));
            await waitFor('every message', () => raw.length === sent.length);
          });
          expect(lines.filter((l) => /^publish /i.test(l))).toHaveLength(12);
          expect(raw.map((t) => JSON.parse(t) as unknown)).toEqual(sent);
          expect(await worker.pubsub.kept('run-0')).toEqual(sent.filter((m) => m.i % 2 === 0));
        } finally {
          reader.disconnect();
        }
      });

      it("one job's whole life (enqueue with a job id, pickup, completion) stays within its budget", async () => {
        const prefix = uniqueRedisPrefix();
        const bus = open(prefix);
        let done = 0;
        // As the agent-worker consumes: several at once, already blocked waiting when the job comes.
        bus.queue.consume('q', async () => void done++, { concurrency: 4 });
        await bus.queue.enqueue('q', { n: 0 });
        await waitFor('the warm-up job', () => done === 1);
        await sleep(300);
        const lines = await commandsOf(prefix, async () => {
          await bus.queue.enqueue('q', { n: 1 }, { jobId: 'run-1' });
          await waitFor('the job', () => done === 2);
          // The completion (and BullMQ's look for a next job) is written after the handler returns.
          await sleep(300);
        });
        // 60 at the time of writing (BullMQ 6.7: add 10, pickups and a block 18, completion with its
        // look for a next job 24, one more pickup and block 8), all BullMQ's; the slack is a
        // blocking wait or two. Past it is the deduplication key (SET, and PTTL, GET, DEL at the
        // finish: 68) or the job kept (ZADD, HSET and the finished set's trims), or an extra round
        // of BullMQ work per run.
        expect(lines.length, lines.join('\n')).toBeLessThanOrEqual(JOB_LIFE_BUDGET);
      });
    });

    it('keeps prefixes apart: channels, queues and schedules', async () => {
      const a = open();
      const b = open();
      const heardA: unknown[] = [];
      const heardB: unknown[] = [];
      await a.pubsub.subscribe('ch', (m) => heardA.push(m));
      await b.pubsub.subscribe('ch', (m) => heardB.push(m));
      await a.pubsub.publish('ch', 'for a');
      await waitFor('a', () => heardA.length === 1);
      await sleep(100);
      expect(heardB).toEqual([]);

      await a.queue.enqueue('q', { n: 1 });
      await a.scheduler.upsert('s', { pattern: '0 0 0 1 1 *' }, {});
      expect((await b.queue.counts('q')).waiting).toBe(0);
      expect(await b.scheduler.list()).toEqual([]);
      expect((await a.queue.counts('q')).waiting).toBe(1);
    });

    it('two buses upserting and consuming one schedule fire once per tick', async () => {
      const prefix = uniqueRedisPrefix();
      const a = open(prefix);
      const b = open(prefix);
      const fires: Array<CronFire<unknown> & { by: string }> = [];
      a.scheduler.consume(async (f) => void fires.push({ ...f, by: 'a' }), { concurrency: 2 });
      b.scheduler.consume(async (f) => void fires.push({ ...f, by: 'b' }), { concurrency: 2 });
      await Promise.all([
        a.scheduler.upsert('shared', { pattern: '* * * * * *' }, { from: 'a' }),
        b.scheduler.upsert('shared', { pattern: '* * * * * *' }, { from: 'b' }),
      ]);
      await sleep(3_300);
      const ticks = fires.map((f) => f.scheduledAt.getTime());
      expect(ticks.length).toBeGreaterThanOrEqual(2);
      expect(new Set(ticks).size).toBe(ticks.length);
      expect(await a.scheduler.list()).toHaveLength(1);
    });

    it('re-subscribes after the subscriber connection is killed', async () => {
      const prefix = uniqueRedisPrefix();
      const bus = open(prefix);
      const got: unknown[] = [];
      await bus.pubsub.subscribe('ch', (m) => got.push(m));
      const admin = new Redis(redisUrl());
      try {
        const clients = (await admin.client('LIST')) as string;
        const line = clients.split('\n').find((l) => l.includes(` name=${prefix}:subscriber `));
        const id = /\bid=(\d+)/.exec(line ?? '')?.[1];
        expect(id).toBeDefined();
        await admin.client('KILL', 'ID', id!);
        let n = 0;
        await waitFor('a message after the reconnect', async () => {
          await bus.pubsub.publish('ch', ++n).catch(() => undefined);
          await sleep(50);
          return got.length > 0;
        });
        // A killed connection loses what was published while it was down, nothing after.
        const before = got.length;
        await bus.pubsub.publish('ch', 'after');
        await waitFor('next message', () => got.length === before + 1);
      } finally {
        admin.disconnect();
      }
    });

    it('UNSUBSCRIBEs a channel when its last handler leaves', async () => {
      const prefix = uniqueRedisPrefix();
      const bus = open(prefix);
      const admin = new Redis(redisUrl());
      try {
        const numsub = async () => Number(((await admin.pubsub('NUMSUB', `${prefix}:ch`)) as [string, number])[1]);
        const off1 = await bus.pubsub.subscribe('ch', () => {});
        const off2 = await bus.pubsub.subscribe('ch', () => {});
        expect(await numsub()).toBe(1);
        await off1();
        expect(await numsub()).toBe(1);
        await off2();
        expect(await numsub()).toBe(0);
      } finally {
        admin.disconnect();
      }
    });

    it('close releases every connection it opened', async () => {
      const prefix = uniqueRedisPrefix();
      const bus = open(prefix);
      const admin = new Redis(redisUrl());
      const ours = async () =>
        ((await admin.client('LIST')) as string).split('\n').filter((l) => l.includes(` name=${prefix}:`)).length;
      try {
        await bus.pubsub.subscribe('ch', () => {});
        bus.queue.consume('q', async () => {}, { concurrency: 2 });
        bus.scheduler.consume(async () => {}, { concurrency: 1 });
        await bus.queue.enqueue('q', {});
        await bus.scheduler.upsert('s', { pattern: '0 0 0 1 1 *' }, {});
        await waitFor('connections up', async () => (await ours()) >= 6);
        await bus.close();
        await waitFor('connections gone', async () => (await ours()) === 0);
      } finally {
        admin.disconnect();
      }
    });

    it('shares a rate limit between buses on one prefix, and only there', async () => {
      const prefix = uniqueRedisPrefix();
      const a = open(prefix);
      const b = open(prefix);
      const other = open();
      const rule = { limit: 3, windowMs: 60_000 };
      const seen = [];
      for (const bus of [a, b, a, b]) seen.push((await bus.rateLimit('chat:k', rule)).allowed);
      expect(seen).toEqual([true, true, true, false]);
      expect((await other.rateLimit('chat:k', rule)).allowed).toBe(true);
      // The bucket expires once it would be full again: no key is left behind for ever.
      const admin = new Redis(redisUrl());
      try {
        const ttl = await admin.pttl(`${prefix}:ratelimit:chat:k`);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(60_001);
      } finally {
        admin.disconnect();
      }
    });

    it('fails fast when Redis cannot be reached', async () => {
      const bus = createRedisBus<TestQueues, TestChannels>({ url: 'redis://127.0.0.1:1', prefix: uniqueRedisPrefix(), logger: captureLogger().logger, connectTimeoutMs: 300 });
      buses.push(bus);
      const t0 = Date.now();
      await expect(bus.queue.enqueue('q', {})).rejects.toThrow(/not connected/);
      await expect(bus.pubsub.publish('ch', 1)).rejects.toThrow(/not connected/);
      await expect(bus.ping()).rejects.toThrow();
      await expect(bus.rateLimit('k', { limit: 1, windowMs: 1_000 })).rejects.toThrow(/not connected/);
      expect(Date.now() - t0).toBeLessThan(3_000);
    });
  });
});
