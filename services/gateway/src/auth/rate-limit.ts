/**
 * Fixed-window counters in memory, per replica: the floor under the shared login count
 * (login-limit.ts), which still holds while the bus is away.
 */
export class RateLimiter {
  #windows = new Map<string, { count: number; resetAt: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one hit; answers the seconds to wait when the key is over its limit, else 0. */
  hit(key: string): number {
    const t = this.now();
    let w = this.#windows.get(key);
    if (!w || w.resetAt <= t) {
      w = { count: 0, resetAt: t + this.windowMs };
      this.#windows.set(key, w);
      if (this.#windows.size > 10_000) this.#sweep(t);
    }
    w.count++;
    return w.count > this.limit ? Math.ceil((w.resetAt - t) / 1000) : 0;
  }

  /** Answers the wait without counting. */
  blocked(key: string): number {
    const w = this.#windows.get(key);
    const t = this.now();
    return w && w.resetAt > t && w.count >= this.limit ? Math.ceil((w.resetAt - t) / 1000) : 0;
  }

  reset(key: string): void {
    this.#windows.delete(key);
  }

  #sweep(t: number): void {
    for (const [k, w] of this.#windows) if (w.resetAt <= t) this.#windows.delete(k);
  }
}
