import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus } from '@agentry/bus';
import { RunKeeps } from '@agentry/contracts';
import { waitFor } from '@agentry/testing';
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

afterEach(() => {
  for (const l of started.splice(0)) l.stop();
});

describe('RunLeases: one worker at a time per run', () => {
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
