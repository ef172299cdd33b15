import type { RateLimitOptions, RateLimitResult, RateLimitRule } from '../ports.js';
import { gcraHit, gcraOf } from '../rate-limit.js';

/** Buckets kept before full ones are swept (a full bucket is the same as no entry). */
const SWEEP_AT = 10_000;

/** In-process buckets: one process is the whole deployment in embedded mode. */
export class MemoryRateLimiter {
  readonly #tat = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  async hit(key: string, rule: RateLimitRule, opts: RateLimitOptions = {}): Promise<RateLimitResult> {
    const g = gcraOf(rule);
    const now = this.now();
    const { tat, ...result } = gcraHit(g, this.#tat.get(key), now);
    if (result.allowed && !opts.peek) {
      this.#tat.set(key, tat);
      if (this.#tat.size > SWEEP_AT) for (const [k, t] of this.#tat) if (t <= now) this.#tat.delete(k);
    }
    return result;
  }

  async clear(key: string): Promise<void> {
    this.#tat.delete(key);
  }
}
