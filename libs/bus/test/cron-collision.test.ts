import { describe, expect, it } from 'vitest';
import type { RedisContext } from '../src/redis/context.js';
import { RedisCronScheduler } from '../src/redis/cron.js';

/**
 * Two replicas upserting one schedule at once: BullMQ refuses the second (SchedulerJobIdCollision,
 * -10) when the tick's job the first made is already running, and stores nothing. The upsert is
 * tried again, and only that refusal is.
 */
function schedulerFailing(codes: unknown[]): { scheduler: RedisCronScheduler; calls: () => number } {
  let calls = 0;
  const queue = {
    upsertJobScheduler: async () => {
      const code = codes[calls++];
      if (code !== undefined) throw Object.assign(new Error(`refused (${String(code)})`), { code });
    },
  };
  const ctx = { queue: async () => queue } as unknown as RedisContext;
  return { scheduler: new RedisCronScheduler(ctx, new Set()), calls: () => calls };
}

describe('RedisCronScheduler.upsert against a concurrent upsert of the same id', () => {
  it('tries again after a tick-job collision (-10 or -11) until it goes through', async () => {
    const { scheduler, calls } = schedulerFailing([-10, -11]);
    await scheduler.upsert('shared', { pattern: '* * * * * *' }, {});
    expect(calls()).toBe(3);
  });

  it('gives up after five collisions, and never retries another error', async () => {
    const collided = schedulerFailing([-10, -10, -10, -10, -10, -10]);
    await expect(collided.scheduler.upsert('shared', { pattern: '* * * * * *' }, {})).rejects.toThrow(/refused \(-10\)/);
    expect(collided.calls()).toBe(5);
    const other = schedulerFailing(['ECONNRESET']);
    await expect(other.scheduler.upsert('shared', { pattern: '* * * * * *' }, {})).rejects.toThrow(/ECONNRESET/);
    expect(other.calls()).toBe(1);
  });
});
