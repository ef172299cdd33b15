import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus } from '@agentry/bus';
import { PubSubChannels } from '@agentry/contracts';
import { ListenerWatchdog } from '../src/listener-watchdog.js';

/**
 * A streamed chat whose gateway died is cancelled once nobody listened for it through the resume
 * grace (and 3 checks): a client resuming on another gateway subscribes to the dead one's
 * channel within it, and its run must live on.
 */
const logger = pino({ level: 'silent' });
const bus = createMemoryBus({ logger });
let watchdog: ListenerWatchdog | undefined;

afterEach(() => watchdog?.stop());

describe('the listener watchdog and the resume grace', () => {
  it('cancels a run nobody listens for only after the grace', async () => {
    watchdog = new ListenerWatchdog(bus, logger, () => 20, () => 400);
    watchdog.start();
    const ctl = new AbortController();
    const started = Date.now();
    watchdog.watch('r1', PubSubChannels.replies('dead-gateway'), ctl);
    await new Promise<void>((resolve) => ctl.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
  });

  it('keeps a run whose channel gets a listener within the grace (a resume on another gateway)', async () => {
    watchdog = new ListenerWatchdog(bus, logger, () => 20, () => 400);
    watchdog.start();
    const ctl = new AbortController();
    const channel = PubSubChannels.replies('dead-gateway-2');
    watchdog.watch('r2', channel, ctl);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const off = await bus.pubsub.subscribe(channel, () => {});
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(ctl.signal.aborted).toBe(false);
    // The resumed client leaves too: then the run goes, after a grace of its own.
    await off();
    await new Promise<void>((resolve) => ctl.signal.addEventListener('abort', () => resolve(), { once: true }));
  });

  it('with no grace, three checks without a listener are enough', async () => {
    watchdog = new ListenerWatchdog(bus, logger, () => 20, () => 0);
    watchdog.start();
    const ctl = new AbortController();
    const started = Date.now();
    watchdog.watch('r3', PubSubChannels.replies('dead-gateway-3'), ctl);
    await new Promise<void>((resolve) => ctl.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(Date.now() - started).toBeLessThan(400);
  });
});
