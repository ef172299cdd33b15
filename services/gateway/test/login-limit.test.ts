import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { LOGIN_SLOWDOWN_MS, LoginLimiter } from '../src/auth/login-limit.js';

/**
 * The login limiter on its own: the shared count (the bus) and the per-process floor. The e2e
 * attack suite runs it through the login route across two replicas on Redis.
 */

function logs() {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
  return { lines, logger };
}

describe('LoginLimiter', () => {
  it('failures of one (username, address) counted by another limiter on the same bus refuse that pair only; a success clears it', async () => {
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const { logger } = logs();
    const [a, b] = [new LoginLimiter(bus, logger, async () => {}), new LoginLimiter(bus, logger, async () => {})];
    for (let i = 0; i < 10; i++) {
      expect(await (i % 2 ? a : b).attempt('10.0.0.1', 'eve')).toBe(0);
      await (i % 2 ? a : b).failed('10.0.0.1', 'eve');
    }
    expect(await a.attempt('10.0.0.1', 'eve')).toBeGreaterThanOrEqual(1);
    expect(await b.attempt('10.0.0.1', 'eve')).toBeGreaterThanOrEqual(1);
    expect(await a.attempt('10.0.0.1', 'other')).toBe(0);
    expect(await a.attempt('10.0.0.2', 'eve')).toBe(0);
    await b.succeeded('10.0.0.1', 'eve');
    // b's own count is cleared too; a still holds its five, under the limit.
    expect(await a.attempt('10.0.0.1', 'eve')).toBe(0);
    expect(await b.attempt('10.0.0.1', 'eve')).toBe(0);
    await bus.close();
  });

  it('failures for a username from many addresses only slow its logins down, never refuse them', async () => {
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const { logger } = logs();
    const pauses: number[] = [];
    const [a, b] = [new LoginLimiter(bus, logger, async (ms) => pauses.push(ms)), new LoginLimiter(bus, logger, async (ms) => pauses.push(ms))];
    for (let i = 0; i < 20; i++) {
      expect(await (i % 2 ? a : b).attempt(`10.3.0.${i}`, 'admin')).toBe(0);
      await (i % 2 ? a : b).failed(`10.3.0.${i}`, 'admin');
    }
    const slowedWhileAttacked = pauses.length;
    expect(slowedWhileAttacked).toBeGreaterThan(0);
    expect(await a.attempt('10.3.1.1', 'admin')).toBe(0);
    expect(await b.attempt('10.3.1.2', 'admin')).toBe(0);
    expect(pauses).toHaveLength(slowedWhileAttacked + 2);
    expect(pauses.every((ms) => ms === LOGIN_SLOWDOWN_MS)).toBe(true);
    expect(await a.attempt('10.3.1.1', 'someone-else')).toBe(0);
    expect(pauses).toHaveLength(slowedWhileAttacked + 2);
    await bus.close();
  });

  it('counts attempts per address on the bus: 30 a minute', async () => {
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const { logger } = logs();
    const [a, b] = [new LoginLimiter(bus, logger), new LoginLimiter(bus, logger)];
    const waits: number[] = [];
    for (let i = 0; i < 31; i++) waits.push(await (i % 2 ? a : b).attempt('10.1.1.1', `u${i}`));
    expect(waits.slice(0, 30).every((w) => w === 0)).toBe(true);
    expect(waits[30]).toBeGreaterThanOrEqual(1);
    await bus.close();
  });

  it('while the bus does not answer, the per-process count still limits, and one warning says so', async () => {
    const down: Pick<Bus, 'rateLimit' | 'clearRateLimit'> = {
      rateLimit: async () => {
        throw new Error('connection refused');
      },
      clearRateLimit: async () => {
        throw new Error('connection refused');
      },
    };
    const { lines, logger } = logs();
    const pauses: number[] = [];
    const limiter = new LoginLimiter(down, logger, async (ms) => pauses.push(ms));
    for (let i = 0; i < 10; i++) {
      expect(await limiter.attempt('10.2.0.1', 'eve')).toBe(0);
      await limiter.failed('10.2.0.1', 'eve');
    }
    expect(await limiter.attempt('10.2.0.1', 'eve')).toBeGreaterThanOrEqual(1);
    expect(await limiter.attempt('10.2.1.2', 'eve')).toBe(0);
    expect(pauses).toEqual([LOGIN_SLOWDOWN_MS]);
    await limiter.succeeded('10.2.0.1', 'eve');
    expect(await limiter.attempt('10.2.0.1', 'eve')).toBe(0);
    expect(lines.filter((l) => /counted per replica only/.test(l.msg))).toHaveLength(1);
  });
});
