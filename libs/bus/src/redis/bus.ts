import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import type { PubSubMessages, QueuePayloads } from '@agentry/contracts';
import type { Bus, PayloadMap } from '../ports.js';
import { DEFAULT_CLOSE_DEADLINE_MS } from '../shared.js';
import { RedisContext } from './context.js';
import { RedisCronScheduler } from './cron.js';
import { RedisJobQueue, type RedisConsumer } from './job-queue.js';
import { RedisPubSub } from './pubsub.js';
import { RedisRateLimiter } from './rate-limit.js';
import { startLeaseKeeper } from './lease-keeper.js';

export interface RedisBusOptions {
  url: string;
  /** BullMQ key prefix and pub/sub channel prefix (default `agentry`); tests isolate with it. */
  prefix?: string;
  logger: Logger;
  /**
   * How long a command may wait for the very first connection (default 5 s); once Redis has
   * been up, commands fail at once while it is away.
   */
  connectTimeoutMs?: number;
  /** How long close() lets running jobs finish before aborting them (default 10 s). */
  closeDeadlineMs?: number;
  /**
   * Publishes that come while one is in flight on their channel leave together as one frame
   * (default true). False during a rolling upgrade from a release whose subscribers read only
   * one message a PUBLISH (`reliability.rolling_upgrade`).
   */
  batchFrames?: boolean;
}

/**
 * Cluster mode: BullMQ queues and job schedulers, ioredis pub/sub. The payload maps default to
 * the services' (`@agentry/contracts`); a test may bring its own.
 */
export function createRedisBus<Q extends PayloadMap = QueuePayloads, C extends PayloadMap = PubSubMessages>(opts: RedisBusOptions): Bus<Q, C> {
  const prefix = opts.prefix ?? 'agentry';
  // It becomes part of connection names, which Redis refuses with spaces.
  if (!/^[^\s]+$/.test(prefix)) throw new Errors.CONFIG(`bus prefix "${prefix}" must be non-empty, without spaces`);
  const logger = opts.logger.child({ component: 'bus', adapter: 'redis', prefix });
  const ctx = new RedisContext(opts.url, prefix, logger, opts.connectTimeoutMs);
  const consumers = new Set<RedisConsumer>();
  const queue = new RedisJobQueue<Q>(ctx, consumers);
  const pubsub = new RedisPubSub<C>(ctx, opts.batchFrames ?? true);
  const scheduler = new RedisCronScheduler(ctx, consumers);
  const limiter = new RedisRateLimiter(ctx);
  let closing: Promise<void> | undefined;

  return {
    kind: 'redis',
    queue,
    pubsub,
    scheduler,
    async ping() {
      // The subscriber counts too: without it, run events would silently stop reaching this replica.
      await Promise.all([ctx.ready(ctx.producer), ctx.ready(ctx.subscriber)]);
      await ctx.producer.ping();
    },
    rateLimit: (key, rule, limitOpts) => limiter.hit(key, rule, limitOpts),
    clearRateLimit: (key) => limiter.clear(key),
    count: (key, by, ttlMs) => limiter.count(key, by, ttlMs),
    reserve: (key, by, max, ttlMs) => limiter.reserve(key, by, max, ttlMs),
    lease: (key, owner, ttlMs) => limiter.lease(key, owner, ttlMs),
    leaseHolders: (keys) => limiter.leaseHolders(keys),
    keepLeases: (keeperOpts) => startLeaseKeeper(opts.url, (key) => limiter.leaseKey(key), logger, { ...keeperOpts, connectionName: prefix }),
    close() {
      closing ??= (async () => {
        const deadline = opts.closeDeadlineMs ?? DEFAULT_CLOSE_DEADLINE_MS;
        await Promise.all([...consumers].map((c) => c.close(deadline)));
        await ctx.close();
      })();
      return closing;
    },
  };
}
