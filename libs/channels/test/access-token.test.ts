import { describe, expect, it } from 'vitest';
import { TokenRejectedError, withAccessToken } from '../src/access-token.js';
import { MemoryTokenCache, PlatformError } from '../src/index.js';

/** Hands out token-1, token-2, … and counts the fetches. */
function tokenSource(): { fetch: () => Promise<{ token: string; expiresInMs: number }>; fetches: () => number } {
  let n = 0;
  return {
    fetch: () => Promise.resolve({ token: `token-${++n}`, expiresInMs: 60 * 60_000 }),
    fetches: () => n,
  };
}

const rejected = () => new TokenRejectedError('token rejected', { status: 401, retryable: false });

describe('withAccessToken', () => {
  it('runs the call with the cached token', async () => {
    const tokens = new MemoryTokenCache();
    const source = tokenSource();
    expect(await withAccessToken(tokens, 'k', source.fetch, async (t) => `used ${t}`)).toBe('used token-1');
    expect(await withAccessToken(tokens, 'k', source.fetch, async (t) => `used ${t}`)).toBe('used token-1');
    expect(source.fetches()).toBe(1);
  });

  it('drops a rejected token and runs the call once more with a fresh one', async () => {
    const tokens = new MemoryTokenCache();
    const source = tokenSource();
    const seen: string[] = [];
    const result = await withAccessToken(tokens, 'k', source.fetch, async (t) => {
      seen.push(t);
      if (t === 'token-1') throw rejected();
      return 'ok';
    });
    expect(result).toBe('ok');
    expect(seen).toEqual(['token-1', 'token-2']);
    // The fresh token is the one cached from now on.
    expect(await tokens.get('k', source.fetch)).toBe('token-2');
  });

  it('reports a second rejection instead of fetching again', async () => {
    const source = tokenSource();
    let calls = 0;
    const call = async () => {
      calls += 1;
      throw rejected();
    };
    await expect(withAccessToken(new MemoryTokenCache(), 'k', source.fetch, call)).rejects.toBeInstanceOf(TokenRejectedError);
    expect(calls).toBe(2);
    expect(source.fetches()).toBe(2);
  });

  it('neither retries nor drops the token on other errors', async () => {
    const tokens = new MemoryTokenCache();
    const source = tokenSource();
    const failure = new PlatformError('busy', { status: 503, retryable: true });
    let calls = 0;
    const call = async () => {
      calls += 1;
      throw failure;
    };
    await expect(withAccessToken(tokens, 'k', source.fetch, call)).rejects.toBe(failure);
    expect(calls).toBe(1);
    expect(await tokens.get('k', source.fetch)).toBe('token-1');
  });

  it('does not retry a failing token fetch, even one that says the token was rejected', async () => {
    let fetches = 0;
    const fetchToken = () => {
      fetches += 1;
      return Promise.reject(rejected());
    };
    let calls = 0;
    await expect(
      withAccessToken(new MemoryTokenCache(), 'k', fetchToken, async () => {
        calls += 1;
      }),
    ).rejects.toBeInstanceOf(TokenRejectedError);
    expect(fetches).toBe(1);
    expect(calls).toBe(0);
  });
});
