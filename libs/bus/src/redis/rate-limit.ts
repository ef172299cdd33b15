import type { RateLimitOptions, RateLimitResult, RateLimitRule } from '../ports.js';
import { gcraOf } from '../rate-limit.js';
import type { RedisContext } from './context.js';

export class RedisRateLimiter {
  constructor(private readonly ctx: RedisContext) {}

  async hit(key: string, rule: RateLimitRule, opts: RateLimitOptions = {}): Promise<RateLimitResult> {
    const g = gcraOf(rule);
    await this.ctx.ready(this.ctx.producer);
    const conn = this.ctx.producer;
    const [allowed, remaining, retryAfterMs] = await conn.agentryRateLimit(this.#key(key), g.intervalMs, g.burst, opts.peek ? 1 : 0);
    return { allowed: allowed === 1, remaining, retryAfterMs };
  }

  async clear(key: string): Promise<void> {
    await this.ctx.command(this.ctx.producer, () => this.ctx.producer.del(this.#key(key)));
  }

  /**
   * `Bus.count`: one script (SET NX gives the window its lifetime once, INCRBY counts), three
   * commands a call where MULTI/EXEC around the same two cost four (issue 39's budget).
   */
  async count(key: string, by: number, ttlMs: number): Promise<number> {
    const k = `${this.ctx.prefix}:count:${key}`;
    const conn = this.ctx.producer;
    return Number(await this.ctx.command(conn, () => conn.agentryCount(k, Math.max(1, Math.round(ttlMs)), Math.round(by))));
  }

  /** `Bus.reserve`: one script, so that no other caller adds between the read and the add. */
  async reserve(key: string, by: number, max: number, ttlMs: number): Promise<{ granted: boolean; value: number }> {
    const k = `${this.ctx.prefix}:count:${key}`;
    const conn = this.ctx.producer;
    const [granted, value] = await this.ctx.command(conn, () => conn.agentryReserve(k, Math.max(1, Math.round(ttlMs)), Math.round(by), Number.isFinite(max) ? Math.floor(max) : Number.MAX_SAFE_INTEGER));
    return { granted: granted === 1, value: Number(value) };
  }

  /**
   * `Bus.lease`: a free key is taken with one SET NX (the claim of every run: one command where
   * the script costs three); only a key already held, by this owner (a renewal) or another, goes
   * to the script, which cannot take it from another between its read and its write.
   */
  async lease(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const conn = this.ctx.producer;
    const k = this.leaseKey(key);
    const ms = Math.max(1, Math.round(ttlMs));
    if ((await this.ctx.command(conn, () => conn.set(k, owner, 'PX', ms, 'NX'))) === 'OK') return true;
    return (await this.ctx.command(conn, () => conn.agentryLease(k, owner, ms))) === 1;
  }

  async leaseHolders(keys: readonly string[]): Promise<Array<string | null>> {
    if (keys.length === 0) return [];
    const conn = this.ctx.producer;
    return this.ctx.command(conn, () => conn.mget(keys.map((k) => this.leaseKey(k))));
  }

  /** The Redis key of lease `key`. */
  leaseKey(key: string): string {
    return `${this.ctx.prefix}:lease:${key}`;
  }

  #key(key: string): string {
    return `${this.ctx.prefix}:ratelimit:${key}`;
  }
}
