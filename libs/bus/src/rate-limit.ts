import type { RateLimitResult, RateLimitRule } from './ports.js';

/**
 * The generic cell rate algorithm (GCRA), the token bucket written as one timestamp per key:
 * `tat`, the moment the bucket is full again. Each hit moves it one emission interval
 * (window / limit) later; a hit is refused while it would move it more than `burst` intervals
 * past now. No timers, no refill job, and a refused hit changes nothing. Both adapters use
 * these numbers (the Redis one inside its script), so they answer alike.
 */

export interface Gcra {
  /** Milliseconds per token, whole (Redis keeps integers exactly). */
  intervalMs: number;
  burst: number;
}

export function gcraOf(rule: RateLimitRule): Gcra {
  if (!(rule.limit >= 1) || !(rule.windowMs >= 1)) throw new RangeError('rate limit: limit and windowMs must be at least 1');
  return { intervalMs: Math.max(1, Math.round(rule.windowMs / rule.limit)), burst: Math.max(1, Math.floor(rule.burst ?? rule.limit)) };
}

/** One hit at `now` against the stored `tat` (undefined: a full bucket); `tat` is what to store when allowed. */
export function gcraHit(g: Gcra, storedTat: number | undefined, now: number): RateLimitResult & { tat: number } {
  const tat = Math.max(storedTat ?? now, now);
  const next = tat + g.intervalMs;
  const allowAt = next - g.burst * g.intervalMs;
  if (now < allowAt) return { allowed: false, remaining: 0, retryAfterMs: allowAt - now, tat };
  return { allowed: true, remaining: Math.floor((now - allowAt) / g.intervalMs), retryAfterMs: 0, tat: next };
}
