import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { LoginLimiter } from '../src/auth/login-limit.js';

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
  it('refuses a username after 10 failures counted by another limiter on the same bus, and a success clears them', async () => {
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const { logger } = logs();
    const [a, b] = [new LoginLimiter(bus, logger), new LoginLimiter(bus, logger)];
    for (let i = 0; i < 10; i++) {
      expect(await (i % 2 ? a : b).attempt(`10.0.0.${i}`, 'eve')).toBe(0);
      await (i % 2 ? a : b).failed('eve');
    }
    expect(await a.attempt('10.0.1.1', 'eve')).toBeGreaterThanOrEqual(1);
    expect(await b.attempt('10.0.1.2', 'eve')).toBeGreaterThanOrEqual(1);
    expect(await a.attempt('10.0.1.3', 'other')).toBe(0);
    await b.succeeded('eve');
    // b's own count is cleared too; a still holds its five, under the limit.
    expect(await a.attempt('10.0.1.4', 'eve')).toBe(0);
    expect(await b.attempt('10.0.1.5', 'eve')).toBe(0);
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
    const limiter = new LoginLimiter(down, logger);
    for (let i = 0; i < 10; i++) {
      expect(await limiter.attempt(`10.2.0.${i}`, 'eve')).toBe(0);
      await limiter.failed('eve');
    }
    expect(await limiter.attempt('10.2.1.1', 'eve')).toBeGreaterThanOrEqual(1);
    await limiter.succeeded('eve');
    expect(await limiter.attempt('10.2.1.2', 'eve')).toBe(0);
    expect(lines.filter((l) => /counted per replica only/.test(l.msg))).toHaveLength(1);
  });
});
