import type { TokenCache } from './adapter.js';

/** Tokens are dropped this long before the platform says they expire. */
const EXPIRY_MARGIN_MS = 5 * 60_000;

/**
 * Per-process token cache. Each replica fetches its own tokens: platforms hand out several valid
 * tokens per app, so sharing them through Redis would buy little and put secrets in Redis.
 */
export class MemoryTokenCache implements TokenCache {
  private readonly tokens = new Map<string, { token: string; until: number }>();
  private readonly inflight = new Map<string, Promise<string>>();

  constructor(private readonly now: () => number = Date.now) {}

  async get(key: string, fetchToken: () => Promise<{ token: string; expiresInMs: number }>): Promise<string> {
    const cached = this.tokens.get(key);
    if (cached && cached.until > this.now()) return cached.token;
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const fetching = fetchToken()
      .then(({ token, expiresInMs }) => {
        // A token shorter-lived than the margin is used once and not cached.
        const until = this.now() + expiresInMs - Math.min(EXPIRY_MARGIN_MS, expiresInMs / 2);
        this.tokens.set(key, { token, until });
        return token;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, fetching);
    return fetching;
  }

  invalidate(key: string): void {
    this.tokens.delete(key);
  }
}
