import { describe, expect, it } from 'vitest';
import { MemoryTokenCache } from '../src/token-cache.js';

const HOUR = 60 * 60_000;
const MARGIN = 5 * 60_000;

function clock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

/** A token source that counts its fetches and hands out token-1, token-2, … */
function source(expiresInMs = 2 * HOUR): { fetch: () => Promise<{ token: string; expiresInMs: number }>; count: () => number } {
  let n = 0;
  return {
    fetch: () => {
      n += 1;
      return Promise.resolve({ token: `token-${n}`, expiresInMs });
    },
    count: () => n,
  };
}

describe('MemoryTokenCache', () => {
  it('shares one fetch between concurrent callers', async () => {
    const cache = new MemoryTokenCache();
    let release!: (value: { token: string; expiresInMs: number }) => void;
    let fetches = 0;
    const fetchToken = () => {
      fetches += 1;
      return new Promise<{ token: string; expiresInMs: number }>((resolve) => (release = resolve));
    };
    const waiting = [cache.get('acct', fetchToken), cache.get('acct', fetchToken), cache.get('acct', fetchToken)];
    release({ token: 'shared', expiresInMs: HOUR });
    expect(await Promise.all(waiting)).toEqual(['shared', 'shared', 'shared']);
    expect(fetches).toBe(1);
  });

  it('serves a cached token without fetching again', async () => {
    const cache = new MemoryTokenCache();
    const s = source();
    expect(await cache.get('acct', s.fetch)).toBe('token-1');
    expect(await cache.get('acct', s.fetch)).toBe('token-1');
    expect(s.count()).toBe(1);
  });

  it('keeps keys apart', async () => {
    const cache = new MemoryTokenCache();
    const s = source();
    expect(await cache.get('a', s.fetch)).toBe('token-1');
    expect(await cache.get('b', s.fetch)).toBe('token-2');
    expect(await cache.get('a', s.fetch)).toBe('token-1');
  });

  it('fetches afresh after invalidate', async () => {
    const cache = new MemoryTokenCache();
    const s = source();
    await cache.get('acct', s.fetch);
    cache.invalidate('acct');
    expect(await cache.get('acct', s.fetch)).toBe('token-2');
    expect(s.count()).toBe(2);
    cache.invalidate('never-fetched');
  });

  it('drops a token five minutes before it expires', async () => {
    const c = clock();
    const cache = new MemoryTokenCache(c.now);
    const s = source(2 * HOUR);
    await cache.get('acct', s.fetch);
    c.advance(2 * HOUR - MARGIN - 1);
    expect(await cache.get('acct', s.fetch)).toBe('token-1');
    c.advance(1);
    expect(await cache.get('acct', s.fetch)).toBe('token-2');
  });

  it('keeps a short-lived token for half its life', async () => {
    const c = clock();
    const cache = new MemoryTokenCache(c.now);
    const s = source(60_000);
    await cache.get('acct', s.fetch);
    c.advance(29_999);
    expect(await cache.get('acct', s.fetch)).toBe('token-1');
    c.advance(1);
    expect(await cache.get('acct', s.fetch)).toBe('token-2');
  });

  it('does not cache a token that is already expired', async () => {
    const cache = new MemoryTokenCache(clock().now);
    const s = source(0);
    expect(await cache.get('acct', s.fetch)).toBe('token-1');
    expect(await cache.get('acct', s.fetch)).toBe('token-2');
  });

  it('does not remember a failed fetch', async () => {
    const cache = new MemoryTokenCache();
    let calls = 0;
    const flaky = () => {
      calls += 1;
      return calls === 1 ? Promise.reject(new Error('platform down')) : Promise.resolve({ token: 'ok', expiresInMs: HOUR });
    };
    const both = [cache.get('acct', flaky), cache.get('acct', flaky)];
    for (const attempt of both) await expect(attempt).rejects.toThrow('platform down');
    expect(calls).toBe(1);
    expect(await cache.get('acct', flaky)).toBe('ok');
  });
});
