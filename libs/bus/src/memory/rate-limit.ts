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

/** In-process window counters (`Bus.count`): a value and the moment it is forgotten. */
export class MemoryCounters {
  readonly #counts = new Map<string, { value: number; expiresAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  add(key: string, by: number, ttlMs: number): number {
    return this.reserve(key, by, Infinity, ttlMs).value;
  }

  /** `Bus.reserve`: adds `by` only when the sum stays at or under `max`. */
  reserve(key: string, by: number, max: number, ttlMs: number): { granted: boolean; value: number } {
    const now = this.now();
    let entry = this.#counts.get(key);
    if (!entry || entry.expiresAt <= now) {
      entry = { value: 0, expiresAt: now + ttlMs };
      this.#counts.set(key, entry);
      // Expired windows are dropped now and then, so that the map holds about the live ones.
      if (this.#counts.size > SWEEP_AT) for (const [k, e] of this.#counts) if (e.expiresAt <= now) this.#counts.delete(k);
    }
    if (entry.value + by > max) return { granted: false, value: entry.value };
    entry.value += by;
    return { granted: true, value: entry.value };
  }
}

/** In-process leases (`Bus.lease`): a holder and the moment it lapses. */
export class MemoryLeases {
  readonly #leases = new Map<string, { owner: string; expiresAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  take(key: string, owner: string, ttlMs: number): boolean {
    const now = this.now();
    const held = this.#leases.get(key);
    if (held && held.expiresAt > now && held.owner !== owner) return false;
    this.#leases.set(key, { owner, expiresAt: now + ttlMs });
    if (this.#leases.size > SWEEP_AT) for (const [k, e] of this.#leases) if (e.expiresAt <= now) this.#leases.delete(k);
    return true;
  }

  holders(keys: readonly string[]): Array<string | null> {
    const now = this.now();
    return keys.map((k) => {
      const held = this.#leases.get(k);
      return held && held.expiresAt > now ? held.owner : null;
    });
  }
}
