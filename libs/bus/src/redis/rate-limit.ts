import type { RateLimitOptions, RateLimitResult, RateLimitRule } from '../ports.js';
import { gcraOf } from '../rate-limit.js';
import type { RedisContext } from './context.js';

/**
 * `gcraHit` (../rate-limit.ts) as one script, on the server's clock so that replicas with
 * skewed clocks still share one budget. The key expires when its bucket would be full again.
 */
const SCRIPT = `
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local peek = ARGV[3] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local nextTat = tat + interval
local allowAt = nextTat - burst * interval
if now < allowAt then
  return {0, 0, allowAt - now}
end
if not peek then
  redis.call('SET', KEYS[1], nextTat, 'PX', nextTat - now + 1)
end
return {1, math.floor((now - allowAt) / interval), 0}
`;

const COMMAND = 'agentryRateLimit';

export class RedisRateLimiter {
  #defined = false;

  constructor(private readonly ctx: RedisContext) {}

  async hit(key: string, rule: RateLimitRule, opts: RateLimitOptions = {}): Promise<RateLimitResult> {
    const g = gcraOf(rule);
    await this.ctx.ready(this.ctx.producer);
    const conn = this.ctx.producer;
    // defineCommand sends EVALSHA and loads the script again after a Redis restart.
    if (!this.#defined) {
      conn.defineCommand(COMMAND, { numberOfKeys: 1, lua: SCRIPT });
      this.#defined = true;
    }
    const run = (conn as unknown as Record<string, (...args: Array<string | number>) => Promise<[number, number, number]>>)[COMMAND]!;
    const [allowed, remaining, retryAfterMs] = await run.call(conn, this.#key(key), g.intervalMs, g.burst, opts.peek ? 1 : 0);
    return { allowed: allowed === 1, remaining, retryAfterMs };
  }

  async clear(key: string): Promise<void> {
    await this.ctx.command(this.ctx.producer, () => this.ctx.producer.del(this.#key(key)));
  }

  /** `Bus.count`: SET NX gives the window its lifetime once; INCRBY in the same MULTI counts. */
  async count(key: string, by: number, ttlMs: number): Promise<number> {
    const k = `${this.ctx.prefix}:count:${key}`;
    const conn = this.ctx.producer;
    const res = await this.ctx.command(conn, () => conn.multi().set(k, 0, 'PX', Math.max(1, Math.round(ttlMs)), 'NX').incrby(k, Math.round(by)).exec());
    const [err, value] = res?.[1] ?? [new Error('the counter transaction was discarded'), 0];
    if (err) throw err;
    return Number(value);
  }

  #key(key: string): string {
    return `${this.ctx.prefix}:ratelimit:${key}`;
  }
}
