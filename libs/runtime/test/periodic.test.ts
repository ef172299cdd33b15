import { afterEach, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { Registry } from 'prom-client';
import { startPeriodic, type PeriodicPass } from '@agentry/runtime';

function capture() {
  const lines: Array<{ level: number; msg: string; [k: string]: unknown }> = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) });
  return { logger, lines };
}

const started: PeriodicPass[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((p) => p.stop()));
});

describe('startPeriodic', () => {
  it('waits from the end of one pass to the start of the next, never overlapping, and reads the interval each time', async () => {
    vi.useFakeTimers();
    const { logger } = capture();
    let every = 1000;
    let inFlight = 0;
    let most = 0;
    const starts: number[] = [];
    const p = startPeriodic({
      name: 'test-pass',
      everyMs: () => every,
      jitter: 0,
      logger,
      pass: async () => {
        starts.push(Date.now());
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 1500));
        inFlight--;
      },
    });
    started.push(p);
    const t0 = Date.now();
    await vi.advanceTimersByTimeAsync(1000 + 1500 + 1000 + 1);
    expect(starts.map((s) => s - t0)).toEqual([1000, 3500]);
    every = 200;
    await vi.advanceTimersByTimeAsync(1500 + 200 + 1);
    expect(starts.map((s) => s - t0)).toEqual([1000, 3500, 5200]);
    expect(most).toBe(1);
    // runNow during a pass joins it rather than starting a second.
    const joined = p.runNow();
    await vi.advanceTimersByTimeAsync(1500);
    await joined;
    expect(most).toBe(1);
  });

  it('logs a pass that did something at info with its counts, an empty one at debug, a failure at warn, and goes on after it', async () => {
    const { logger, lines } = capture();
    const results: Array<() => Promise<Record<string, number>>> = [
      async () => ({ deleted: 3 }),
      async () => ({ deleted: 0 }),
      async () => {
        throw new Error('database away');
      },
      async () => ({ deleted: 1 }),
    ];
    const registry = new Registry();
    let i = 0;
    const p = startPeriodic({ name: 'retention', everyMs: () => 10, firstDelayMs: 0, jitter: 0, logger, metrics: registry, pass: () => results[Math.min(i++, 3)]!() });
    started.push(p);
    await vi.waitFor(() => expect(i).toBeGreaterThanOrEqual(4), { timeout: 5000 });
    await p.stop();
    const mine = lines.filter((l) => l.pass === 'retention');
    expect(mine[0]).toMatchObject({ level: 30, deleted: 3, msg: 'retention: pass done' });
    expect(mine[1]).toMatchObject({ level: 20, msg: 'retention: pass done, nothing to do' });
    expect(mine[2]).toMatchObject({ level: 40, err: 'database away', msg: 'retention: pass failed; the next one tries again' });
    expect(mine[3]).toMatchObject({ level: 30, deleted: 1 });
    const text = await registry.metrics();
    expect(text).toMatch(/agentry_periodic_passes_total\{pass="retention",outcome="failed"\} 1/);
    expect(text).toMatch(/agentry_periodic_passes_total\{pass="retention",outcome="ok"\} [3-9]/);
  });

  it('aborts a pass past its deadline, and stop() aborts the pass under way and waits for it', async () => {
    const { logger, lines } = capture();
    const stuck = (signal: AbortSignal) => new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
    const p = startPeriodic({ name: 'slow', everyMs: () => 60_000, firstDelayMs: 0, jitter: 0, deadlineMs: () => 50, logger, pass: stuck });
    started.push(p);
    await vi.waitFor(() => expect(lines.some((l) => l.pass === 'slow' && l.level === 40)).toBe(true), { timeout: 5000 });
    expect(lines.find((l) => l.pass === 'slow' && l.level === 40)?.err).toBe('slow: the pass took longer than 50 ms');

    let ended = false;
    const q = startPeriodic({
      name: 'long',
      everyMs: () => 60_000,
      firstDelayMs: 0,
      logger,
      pass: async (signal) => {
        await stuck(signal).finally(() => (ended = true));
      },
    });
    await vi.waitFor(() => expect(lines.some((l) => l.pass === 'long')).toBe(false));
    await new Promise((r) => setTimeout(r, 20));
    await q.stop();
    expect(ended).toBe(true);
    expect(lines.filter((l) => l.pass === 'long' && l.level >= 40)).toEqual([]);
  });

  it('is off while the interval is 0, and starts when it changes', async () => {
    vi.useFakeTimers();
    const { logger } = capture();
    let every = 0;
    let passes = 0;
    started.push(startPeriodic({ name: 'off', everyMs: () => every, jitter: 0, logger, pass: async () => void passes++ }));
    await vi.advanceTimersByTimeAsync(5000);
    expect(passes).toBe(0);
    every = 500;
    await vi.advanceTimersByTimeAsync(1000 + 500 + 1);
    expect(passes).toBeGreaterThanOrEqual(1);
  });
});
