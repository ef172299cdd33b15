import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { FakePlatform } from '@agentry/testing';
import { MemoryTokenCache, PlatformError, type AccountContext, type AdapterIo, type InboundRequest, type TokenCache } from '../src/index.js';

/**
 * Builds accounts from a fake's snake_case account fields, split into settings and secrets as
 * stored accounts are. An override of `undefined` leaves the field out.
 */
export function accountBuilder(
  platform: AccountContext['platform'],
  accountId: string,
  secretFields: readonly string[],
): (fields: Record<string, string>, overrides?: Record<string, string | undefined>) => AccountContext {
  return (fields, overrides = {}) => {
    const settings: Record<string, unknown> = {};
    const secrets: Record<string, string> = {};
    for (const [name, value] of Object.entries({ ...fields, ...overrides })) {
      if (value === undefined) continue;
      if (secretFields.includes(name)) secrets[name] = value;
      else settings[name] = value;
    }
    return { platform, accountId, settings, secrets };
  };
}

/** Real fetch against the fakes, a fresh token cache unless one is given, and the real clock unless told otherwise. */
export function ioWith(opts: { tokens?: TokenCache; now?: () => number } = {}): AdapterIo {
  return { fetch: globalThis.fetch, tokens: opts.tokens ?? new MemoryTokenCache(), now: opts.now ?? Date.now, timeoutMs: 5000 };
}

/** A delivery a fake built (`inbound`, `handshake`, ...) as the gateway hands it to an adapter. */
export function inboundRequest(delivery: { headers: Record<string, string>; body: string; query?: Record<string, string>; method?: string }): InboundRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers)) headers[name.toLowerCase()] = value;
  return { method: delivery.method ?? 'POST', headers, query: delivery.query ?? {}, rawBody: Buffer.from(delivery.body, 'utf8') };
}

/** Starts fakes with `start` on demand; every fake started during a test is closed after it. */
export function closedAfterEach<O, F extends { close(): Promise<void> }>(start: (opts?: O) => Promise<F>): (opts?: O) => Promise<F> {
  const started: F[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((f) => f.close()));
  });
  return async (opts) => {
    const f = await start(opts);
    started.push(f);
    return f;
  };
}

/**
 * One fake for every test in a file: started before the first test and handed to `started`, its
 * `sent` and `calls` cleared after each test so that tests can count from zero, closed after the last.
 */
export function sharedFake<F extends FakePlatform>(start: () => Promise<F>, started: (fake: F) => void): void {
  let fake: F | undefined;
  beforeAll(async () => {
    fake = await start();
    started(fake);
  });
  afterEach(() => {
    if (!fake) return;
    fake.sent.length = 0;
    fake.calls.length = 0;
  });
  afterAll(() => fake?.close());
}

/** The error `promise` rejects with; a promise that resolves fails the test. */
export async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

/** The PlatformError `promise` rejects with; anything else fails the test. */
export async function platformFailure(promise: Promise<unknown>): Promise<PlatformError> {
  const err = await failure(promise);
  expect(err).toBeInstanceOf(PlatformError);
  return err as PlatformError;
}
