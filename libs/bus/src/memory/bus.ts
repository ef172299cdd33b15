import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import type { PubSubMessages, QueuePayloads } from '@agentry/contracts';
import type { Bus, PayloadMap } from '../ports.js';
import { DEFAULT_CLOSE_DEADLINE_MS } from '../shared.js';
import { MemoryCronScheduler, type FireQueues } from './cron.js';
import { MemoryJobQueue } from './job-queue.js';
import { MemoryPubSub } from './pubsub.js';
import { MemoryCounters, MemoryLeases, MemoryRateLimiter } from './rate-limit.js';

export interface MemoryBusOptions {
  logger: Logger;
  /** How long close() lets running jobs finish before aborting them (default 10 s). */
  closeDeadlineMs?: number;
}

/**
 * Embedded mode: queue, pub/sub and cron inside this process; nothing survives a restart. The
 * payload maps default to the services' (`@agentry/contracts`); a test may bring its own.
 */
export function createMemoryBus<Q extends PayloadMap = QueuePayloads, C extends PayloadMap = PubSubMessages>(opts: MemoryBusOptions): Bus<Q, C> {
  const logger = opts.logger.child({ component: 'bus', adapter: 'memory' });
  const queue = new MemoryJobQueue<Q>(logger);
  // Fires get their own queue object so that they never mix with the service queues' names.
  const fires = new MemoryJobQueue<FireQueues>(logger);
  const pubsub = new MemoryPubSub<C>(logger);
  const scheduler = new MemoryCronScheduler(fires, logger);
  const limiter = new MemoryRateLimiter();
  const counters = new MemoryCounters();
  const leases = new MemoryLeases();
  let closing: Promise<void> | undefined;

  return {
    kind: 'memory',
    queue,
    pubsub,
    scheduler,
    async ping() {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
    },
    async rateLimit(key, rule, limitOpts) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return limiter.hit(key, rule, limitOpts);
    },
    async clearRateLimit(key) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return limiter.clear(key);
    },
    async count(key, by, ttlMs) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return counters.add(key, by, ttlMs);
    },
    async reserve(key, by, max, ttlMs) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return counters.reserve(key, by, max, ttlMs);
    },
    async lease(key, owner, ttlMs) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return leases.take(key, owner, ttlMs);
    },
    async leaseHolders(keys) {
      if (closing) throw new Errors.NOT_READY('the bus is closed');
      return leases.holders(keys);
    },
    close() {
      closing ??= (async () => {
        const deadline = opts.closeDeadlineMs ?? DEFAULT_CLOSE_DEADLINE_MS;
        scheduler.close();
        await Promise.all([queue.close(deadline), fires.close(deadline)]);
        pubsub.close();
      })();
      return closing;
    },
  };
}
