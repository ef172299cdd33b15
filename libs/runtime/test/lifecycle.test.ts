import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { HealthRegistry, Lifecycle } from '@agentry/runtime';

const logger = pino({ level: 'silent' });

describe('Lifecycle', () => {
  it('closes in reverse order of registration', async () => {
    const order: string[] = [];
    const lc = new Lifecycle(logger, 1000);
    for (const name of ['db', 'bus', 'http']) lc.add(name, async () => void order.push(name));
    expect(await lc.shutdown('test')).toBe(true);
    expect(order).toEqual(['http', 'bus', 'db']);
  });

  it('gives up on a closer past the deadline and reports failure, still closing nothing after it late', async () => {
    const order: string[] = [];
    const lc = new Lifecycle(logger, 100);
    lc.add('db', async () => void order.push('db'));
    lc.add('slow', () => new Promise<void>(() => {}));
    const started = Date.now();
    expect(await lc.shutdown('test')).toBe(false);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(order).toEqual([]);
  });

  it('keeps going after a closer throws', async () => {
    const order: string[] = [];
    const lc = new Lifecycle(logger, 1000);
    lc.add('db', async () => void order.push('db'));
    lc.add('bad', async () => {
      throw new Error('boom');
    });
    expect(await lc.shutdown('test')).toBe(false);
    expect(order).toEqual(['db']);
  });

  it('is idempotent', async () => {
    let calls = 0;
    const lc = new Lifecycle(logger, 1000);
    lc.add('x', async () => void calls++);
    await Promise.all([lc.shutdown('a'), lc.shutdown('b')]);
    expect(calls).toBe(1);
    expect(lc.stopping).toBe(true);
  });
});

describe('HealthRegistry', () => {
  it('is not ready before start and after stop', async () => {
    const h = new HealthRegistry();
    h.register('db', async () => {});
    expect((await h.check()).ok).toBe(false);
    h.markStarted();
    expect((await h.check()).ok).toBe(true);
    h.markStopping();
    const report = await h.check();
    expect(report.ok).toBe(false);
    expect(HealthRegistry.describeFailure(report)).toBe('shutdown: shutting down');
  });

  it('fails a check that throws or hangs', async () => {
    const h = new HealthRegistry();
    h.markStarted();
    h.register('redis', async () => {
      throw new Error('connection refused');
    });
    h.register('db', () => new Promise(() => {}));
    const report = await h.check(50);
    expect(report.ok).toBe(false);
    expect(report.checks.redis?.error).toBe('connection refused');
    expect(report.checks.db?.error).toMatch(/no answer within 50 ms/);
  });
});
