import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { execFile } from 'node:child_process';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { createRedisBus } from '@agentry/bus/redis';
import { RunKeeps } from '@agentry/contracts';
import { describeWithServers, redisUrl, uniqueRedisPrefix, waitFor } from '@agentry/testing';
import { RunLeases } from '../src/run-leases.js';

/**
 * The worker's side of the run lease: what keeps a run from running twice when a gateway hands
 * it over, and what gives a job put back at shutdown to the next worker at once.
 */
const logger = pino({ level: 'silent' });
const LEASE_MS = 300;
const started: RunLeases[] = [];

function leasesOn(bus: ReturnType<typeof createMemoryBus>, leaseMs = LEASE_MS): RunLeases {
  const leases = new RunLeases(bus, logger, () => leaseMs);
  leases.start();
  started.push(leases);
  return leases;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((l) => l.stop()));
});

describe('RunLeases: one worker at a time per run', () => {
  it('starts the renewal thread (Bus.keepLeases) only once a lease is taken: none while leases are off', async () => {
    let leaseMs = 0;
    const keepers: string[] = [];
    const held: string[] = [];
    const bus = {
      lease: async () => true,
      keepLeases: (opts: { owner: string }) => {
        keepers.push(opts.owner);
        return { ready: true, hold: (key: string) => void held.push(key), release: () => undefined, close: async () => undefined };
      },
    };
    const leases = new RunLeases(bus, logger, () => leaseMs);
    leases.start();
    started.push(leases);
    expect(await leases.take('off-1', new AbortController())).toBe(true);
    expect(keepers).toEqual([]);
    leaseMs = LEASE_MS;
    expect(await leases.take('on-1', new AbortController())).toBe(true);
    expect(await leases.take('on-2', new AbortController())).toBe(true);
    expect(keepers).toEqual([leases.owner]);
    expect(held).toEqual([RunKeeps.lease('on-1'), RunKeeps.lease('on-2')]);
  });

  it('a second worker cannot take a run another live worker holds, nor the same process twice', async () => {
    const bus = createMemoryBus({ logger });
    const a = leasesOn(bus);
    const b = leasesOn(bus);
    expect(await a.take('r1', new AbortController())).toBe(true);
    expect(await b.take('r1', new AbortController())).toBe(false);
    expect(await a.take('r1', new AbortController())).toBe(false);
    // Renewed by its holder well past its length: still held.
    await new Promise((r) => setTimeout(r, LEASE_MS * 2));
    expect(await bus.leaseHolders([RunKeeps.lease('r1')])).toEqual([a.owner]);
    expect(await b.take('r1', new AbortController())).toBe(false);
  });

  it('gives the lease up when the job ends, so the next worker takes the run at once', async () => {
    const bus = createMemoryBus({ logger });
    const a = leasesOn(bus);
    const b = leasesOn(bus);
    const ctl = new AbortController();
    expect(await a.take('r2', ctl)).toBe(true);
    a.drop('r2', ctl);
    await waitFor(async () => (await bus.leaseHolders([RunKeeps.lease('r2')]))[0] === null, 2_000, 5);
    expect(await b.take('r2', new AbortController())).toBe(true);
  });

  it('a worker whose lease another took (it was taken for dead) aborts its copy at the next renewal', async () => {
    // As if this process had stalled past its lease and another worker took the run over meanwhile.
    let takenOver = false;
    const a = new RunLeases({ lease: async () => !takenOver }, logger, () => LEASE_MS);
    a.start();
    started.push(a);
    const ctl = new AbortController();
    expect(await a.take('r3', ctl)).toBe(true);
    await new Promise((r) => setTimeout(r, LEASE_MS));
    expect(ctl.signal.aborted).toBe(false);
    takenOver = true;
    await waitFor(async () => ctl.signal.aborted, 2_000, 5);
    expect(String((ctl.signal.reason as Error).message)).toMatch(/another worker took this run over/);
  });

  it('with leases off (0) every take succeeds and nothing is written', async () => {
    const bus = createMemoryBus({ logger });
    const off = leasesOn(bus, 0);
    expect(await off.take('r4', new AbortController())).toBe(true);
    expect(await bus.leaseHolders([RunKeeps.lease('r4')])).toEqual([null]);
  });
});

/** Samples who holds `redisKey` every 50 ms for `ms`, from another process: it runs while this one's event loop is blocked. */
function sampleHolders(url: string, redisKey: string, ms: number): Promise<string[]> {
  const rounds = Math.ceil(ms / 50);
  const script = `for i in $(seq ${rounds}); do redis-cli -u "$URL" --no-raw GET "$KEY"; sleep 0.05; done`;
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', script], { env: { ...process.env, URL: url, KEY: redisKey } }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim().split('\n'))));
  });
}

function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // A synchronous stretch, as a large JSON parse or a slow synchronous tool would be.
  }
}

describeWithServers('RunLeases on Redis: renewed off the event loop', () => {
  const buses: Bus[] = [];
  afterEach(async () => {
    await Promise.all(buses.splice(0).map((b) => b.close()));
  });

  async function setup(maxStallMs: number, leaseMs = LEASE_MS) {
    const prefix = uniqueRedisPrefix();
    const bus = createRedisBus({ url: redisUrl(), prefix, logger });
    buses.push(bus);
    const leases = new RunLeases(bus, logger, () => leaseMs, maxStallMs);
    leases.start();
    started.push(leases);
    return { leases, key: `${prefix}:lease:${RunKeeps.lease('busy')}` };
  }

  it('a worker whose main thread is busy for three leases keeps its run: the lease never lapses', async () => {
    // A lease of a second, not 300 ms: the renewal thread must get a core within a third of it,
    // and under a CI box's full load (load 14 on 2 cores) 300 ms was once not enough for it.
    const leaseMs = 1_000;
    const { leases, key } = await setup(30_000, leaseMs);
    const ctl = new AbortController();
    expect(await leases.take('busy', ctl)).toBe(true);
    await new Promise((r) => setTimeout(r, leaseMs));
    const samples = sampleHolders(redisUrl(), key, leaseMs * 3 + 500);
    await new Promise((r) => setTimeout(r, 200));
    blockEventLoop(leaseMs * 3);
    const seen = await samples;
    expect(seen.length).toBeGreaterThan(10);
    expect(seen.every((s) => s === `"${leases.owner}"`), seen.join(' ')).toBe(true);
    expect(ctl.signal.aborted).toBe(false);
  });

  it('a main thread stuck past maxStallMs lets its lease lapse, so another worker takes the run', async () => {
    const { leases, key } = await setup(400);
    expect(await leases.take('busy', new AbortController())).toBe(true);
    const samples = sampleHolders(redisUrl(), key, 2_500);
    await new Promise((r) => setTimeout(r, 200));
    blockEventLoop(2_000);
    const seen = await samples;
    expect(seen).toContain('(nil)');
  });
});
