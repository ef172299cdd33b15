import { describe, expect, it } from 'vitest';
import type { RunOutcome } from '@agentry/db';
import { RunEventQueue, RunLeaseWatch, RunRelay, WORKER_LOST_MESSAGE, type RelayLease, type WatchedLease } from '@agentry/runs';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Leases as a map the test changes; `down` makes every read fail (Redis away). */
function leaseSource() {
  const held = new Map<string, string>();
  const state = { down: false, reads: 0 };
  return {
    held,
    state,
    leaseHolders: async (keys: readonly string[]) => {
      state.reads++;
      if (state.down) throw new Error('Redis is not connected');
      return keys.map((k) => held.get(k) ?? null);
    },
  };
}

/** Resolves true when `p` settles within `ms`. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), sleep(ms).then(() => false)]);
}

describe('RunLeaseWatch: a worker taken for dead from its run lease', () => {
  const LEASE_MS = 300;

  it('lapses only after the lease was seen, then missing on checks spanning a sixth of it', async () => {
    const source = leaseSource();
    const watch = RunLeaseWatch.of(source, () => LEASE_MS).watch('r1');
    // Queued: no lease yet, however long: a run waiting for a worker is not dead.
    expect(await settlesWithin(watch.lapsed(), LEASE_MS * 2)).toBe(false);
    source.held.set('run-lease:r1', 'worker-a');
    await sleep(LEASE_MS);
    expect(await settlesWithin(watch.lapsed(), 10)).toBe(false);
    source.held.delete('run-lease:r1');
    expect(await settlesWithin(watch.lapsed(), LEASE_MS * 2)).toBe(true);
    watch.stop();
  });

  it('a failed check is not a death: after Redis was away, a missing lease must stay missing a whole lease', async () => {
    const source = leaseSource();
    const watch = RunLeaseWatch.of(source, () => LEASE_MS).watch('r2');
    source.held.set('run-lease:r2', 'worker-a');
    await sleep(LEASE_MS / 2);
    source.state.down = true;
    source.held.delete('run-lease:r2');
    await sleep(LEASE_MS);
    source.state.down = false;
    // Back, the lease missing (it expired while Redis was away; the worker has not renewed yet).
    expect(await settlesWithin(watch.lapsed(), LEASE_MS / 3)).toBe(false);
    source.held.set('run-lease:r2', 'worker-a');
    expect(await settlesWithin(watch.lapsed(), LEASE_MS * 2)).toBe(false);
    watch.stop();
  });

  it('reads every watched run in one call per check, and stops reading when none is watched', async () => {
    const source = leaseSource();
    const lease = RunLeaseWatch.of(source, () => LEASE_MS);
    const watches = ['a', 'b', 'c'].map((id) => lease.watch(id));
    await sleep(LEASE_MS);
    const reads = source.state.reads;
    expect(reads).toBeGreaterThan(0);
    expect(reads).toBeLessThanOrEqual(Math.ceil(LEASE_MS / (LEASE_MS / 6)) + 1);
    for (const w of watches) w.stop();
    await sleep(LEASE_MS / 3);
    const after = source.state.reads;
    await sleep(LEASE_MS);
    expect(source.state.reads).toBe(after);
  });
});

/** A lease whose lapse the test fires by hand. */
function manualLease(runId: string) {
  let fire!: () => void;
  let lapse = new Promise<void>((r) => (fire = r));
  const handOffs: boolean[] = [];
  const watch: WatchedLease = {
    lapsed: () => lapse,
    reset: () => {
      lapse = new Promise<void>((r) => (fire = r));
    },
    stop: () => undefined,
  };
  const lease: RelayLease = {
    runId,
    watch,
    handOff: async (streamed) => {
      handOffs.push(streamed);
    },
  };
  return { lease, handOffs, lapse: () => fire() };
}

describe('RunRelay with a run lease', () => {
  const running: RunOutcome = { status: 'running', output: null, error: null, usage: null, finishedAt: null };

  it('a lapse after events: the run is handed off as streamed and the client gets the clean error at once', async () => {
    const queue = new RunEventQueue();
    const { lease, handOffs, lapse } = manualLease('r1');
    const relay = new RunRelay(queue, { readRun: async () => running, checkMs: () => 60_000, lease });
    queue.push({ type: 'text', text: 'half an ', runId: 'r1', seq: 0 });
    expect(await relay.next()).toEqual({ type: 'event', event: { type: 'text', text: 'half an ', runId: 'r1', seq: 0 } });
    const next = relay.next();
    lapse();
    expect(await next).toEqual({ type: 'event', event: { type: 'error', runId: 'r1', seq: 1, message: WORKER_LOST_MESSAGE, status: 503 } });
    expect(handOffs).toEqual([true]);
  });

  it('a lapse before any event: the run is handed off to be run again, and the relay waits for the re-run', async () => {
    const queue = new RunEventQueue();
    const { lease, handOffs, lapse } = manualLease('r2');
    const relay = new RunRelay(queue, { readRun: async () => running, checkMs: () => 60_000, lease });
    const next = relay.next();
    lapse();
    await sleep(20);
    expect(handOffs).toEqual([false]);
    queue.push({ type: 'text', text: 'from the second worker', runId: 'r2', seq: 0 });
    expect(await next).toEqual({ type: 'event', event: { type: 'text', text: 'from the second worker', runId: 'r2', seq: 0 } });
    // The re-run's worker can die too: a second lapse is heard.
    const again = relay.next();
    lapse();
    expect(await again).toMatchObject({ type: 'event', event: { type: 'error', message: WORKER_LOST_MESSAGE } });
    expect(handOffs).toEqual([false, true]);
  });

  it('a lapse of a run that ended meanwhile ends from its row, nothing handed off', async () => {
    const queue = new RunEventQueue();
    const { lease, handOffs, lapse } = manualLease('r3');
    const done: RunOutcome = { status: 'succeeded', output: 'all of it', error: null, usage: null, finishedAt: new Date() };
    const relay = new RunRelay(queue, { readRun: async () => done, checkMs: () => 60_000, lease });
    const next = relay.next();
    lapse();
    expect(await next).toEqual({ type: 'ended', run: done });
    expect(handOffs).toEqual([]);
  });
});
