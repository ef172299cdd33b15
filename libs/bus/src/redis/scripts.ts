import type { Redis } from 'ioredis';

/**
 * Every Lua command the Redis adapters run, defined on the producer connection when it is
 * created. ioredis copies a connection's scripts into a pipeline when the pipeline is made, so a
 * command defined later (lazily, on first use) is missing from an auto-pipeline already open in
 * that tick: `pipeline[name] is not a function`, then an uncaught `results[i] is not iterable`
 * that killed the worker under load. Defined up front, every pipeline has them.
 * A defined command sends EVALSHA and falls back to the script on NOSCRIPT (after a Redis restart).
 */

/**
 * A kept publish in one step: append to the log, trim it to its cap (only once it is over: a
 * command saved per event), (re)start its lifetime, then publish. A reader that SUBSCRIBEs and
 * then reads the log sees every message in one or the other (the script runs atomically), so
 * nothing falls between the two.
 */
const PUBLISH_KEPT = `
local n = redis.call('RPUSH', KEYS[1], ARGV[2])
if n > tonumber(ARGV[3]) then redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return redis.call('PUBLISH', ARGV[1], ARGV[2])
`;

/**
 * Several messages of one channel in one step, as one pub/sub message (a batch frame: each
 * message's JSON after a 0x1E byte, which JSON text never holds unescaped): each kept one is
 * appended to its log (KEYS[k]) and trimmed, each log's lifetime restarted once, then the frame
 * published. ARGV: channel, then per message its key index (0: not kept), cap, lifetime, JSON.
 */
const PUBLISH_BATCH = `
local frame = {}
local ttl = {}
for i = 2, #ARGV, 4 do
  local k = tonumber(ARGV[i])
  if k > 0 then
    local n = redis.call('RPUSH', KEYS[k], ARGV[i + 3])
    if n > tonumber(ARGV[i + 1]) then redis.call('LTRIM', KEYS[k], -tonumber(ARGV[i + 1]), -1) end
    ttl[k] = ARGV[i + 2]
  end
  frame[#frame + 1] = ARGV[i + 3]
end
for k, ms in pairs(ttl) do redis.call('PEXPIRE', KEYS[k], ms) end
return redis.call('PUBLISH', ARGV[1], '\\30' .. table.concat(frame, '\\30'))
`;

/**
 * `gcraHit` (../rate-limit.ts) as one script, on the server's clock so that replicas with
 * skewed clocks still share one budget. The key expires when its bucket would be full again.
 */
const RATE_LIMIT = `
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

/** `Bus.lease`: take the key when free or already the caller's, and (re)start its lifetime. */
export const LEASE_SCRIPT = `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`;

/**
 * `Bus.reserve`: the counter `count` keeps (same key, same first lifetime), added to only when
 * the sum stays at or under the ceiling. Answers {added 1|0, value now}.
 */
const RESERVE = `
redis.call('SET', KEYS[1], 0, 'PX', ARGV[1], 'NX')
local cur = tonumber(redis.call('GET', KEYS[1]))
local by = tonumber(ARGV[2])
if cur + by > tonumber(ARGV[3]) then return {0, cur} end
return {1, redis.call('INCRBY', KEYS[1], by)}
`;

/** `Bus.count`: the counter's lifetime set once (SET NX), then the add; answers the value now. */
const COUNT = `
redis.call('SET', KEYS[1], 0, 'PX', ARGV[1], 'NX')
return redis.call('INCRBY', KEYS[1], ARGV[2])
`;

/** The commands as they are called: (key, ...args). */
export interface ScriptCommands {
  agentryLease(key: string, owner: string, ttlMs: number): Promise<number>;
  agentryPublishKept(log: string, channel: string, payload: string, maxLen: number, ttlMs: number): Promise<number>;
  /** (number of keys, ...keys, channel, ...[key index, cap, lifetime, JSON] per message). */
  agentryPublishBatch(...args: Array<string | number>): Promise<number>;
  agentryRateLimit(key: string, intervalMs: number, burst: number, peek: 0 | 1): Promise<[number, number, number]>;
  agentryReserve(key: string, ttlMs: number, by: number, max: number): Promise<[number, number]>;
  agentryCount(key: string, ttlMs: number, by: number): Promise<number>;
}

const SCRIPTS: Record<Exclude<keyof ScriptCommands, 'agentryPublishBatch'>, string> = {
  agentryPublishKept: PUBLISH_KEPT,
  agentryRateLimit: RATE_LIMIT,
  agentryLease: LEASE_SCRIPT,
  agentryReserve: RESERVE,
  agentryCount: COUNT,
};

/** Called once, right after `new Redis(...)`, before any command can be issued on the connection. */
export function defineScripts(conn: Redis): Redis & ScriptCommands {
  for (const [name, lua] of Object.entries(SCRIPTS)) conn.defineCommand(name, { numberOfKeys: 1, lua });
  // Its number of keys varies: the first argument gives it.
  conn.defineCommand('agentryPublishBatch', { lua: PUBLISH_BATCH });
  return conn as Redis & ScriptCommands;
}
