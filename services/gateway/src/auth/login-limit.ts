import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Bus, RateLimitRule } from '@agentry/bus';
import { RateLimiter } from './rate-limit.js';

/** Login attempts per client address. */
const BY_IP: RateLimitRule = { limit: 30, windowMs: 60_000 };
/** Failed logins per (username, address); a success from that address clears them. */
const PAIR_FAILURES: RateLimitRule = { limit: 10, windowMs: 5 * 60_000 };
/**
 * Failed logins per username, from any address. Past this count logins for the name are slowed
 * down, never refused: a refusal here would let anyone lock the owner (or admin) out with a
 * handful of wrong passwords from addresses of their own.
 */
const USER_FAILURES: RateLimitRule = { limit: 10, windowMs: 5 * 60_000 };
/** The pause before a password of a username under attack is checked. */
export const LOGIN_SLOWDOWN_MS = 1000;
/** How often the "counted per replica only" warning may repeat while the bus stays away. */
const WARN_EVERY_MS = 60_000;

/** Hashed so that a bus key names no user and no address. */
function key(kind: 'ip' | 'user' | 'pair', ...who: string[]): string {
  return `login:${kind}:${createHash('sha256').update(who.join('\0')).digest('base64url').slice(0, 32)}`;
}

/**
 * Password-guessing limits, counted twice: in the bus, shared by every gateway replica (Redis in
 * cluster mode, so N replicas do not give an attacker N budgets), and in this process. The
 * local count is the floor: while the bus does not answer, login still works and is still
 * limited, per replica.
 *
 * Refused (429): an address over its attempts, and a (username, address) pair over its
 * failures. Slowed down only: a username over its failures from all addresses together.
 */
export class LoginLimiter {
  readonly #localByIp = new RateLimiter(BY_IP.limit, BY_IP.windowMs);
  readonly #localPairs = new RateLimiter(PAIR_FAILURES.limit, PAIR_FAILURES.windowMs);
  readonly #localUsers = new RateLimiter(USER_FAILURES.limit, USER_FAILURES.windowMs);
  #lastWarning = 0;

  constructor(
    private readonly bus: Pick<Bus, 'rateLimit' | 'clearRateLimit'>,
    private readonly logger: Logger,
    /** Waits the slowdown (tests count the calls instead of waiting). */
    private readonly pause: (ms: number) => Promise<unknown> = sleep,
  ) {}

  /**
   * Counts one attempt from `ip`; answers the seconds to wait (0: go on). When the username is
   * under attack from elsewhere it first waits LOGIN_SLOWDOWN_MS, then lets the attempt go on.
   */
  async attempt(ip: string, username: string): Promise<number> {
    const local = Math.max(this.#localByIp.hit(ip), this.#localPairs.blocked(`${username}\0${ip}`));
    const [byIp, pair, user] = await Promise.all([
      this.#shared(() => this.bus.rateLimit(key('ip', ip), BY_IP)),
      this.#shared(() => this.bus.rateLimit(key('pair', username, ip), PAIR_FAILURES, { peek: true })),
      this.#shared(() => this.bus.rateLimit(key('user', username), USER_FAILURES, { peek: true })),
    ]);
    const wait = Math.max(local, byIp, pair);
    if (wait > 0) return wait;
    if (user > 0 || this.#localUsers.blocked(username) > 0) await this.pause(LOGIN_SLOWDOWN_MS);
    return 0;
  }

  async failed(ip: string, username: string): Promise<void> {
    this.#localPairs.hit(`${username}\0${ip}`);
    this.#localUsers.hit(username);
    await Promise.all([
      this.#shared(() => this.bus.rateLimit(key('pair', username, ip), PAIR_FAILURES)),
      this.#shared(() => this.bus.rateLimit(key('user', username), USER_FAILURES)),
    ]);
  }

  /** Clears the failures of this address for the name; the name's count from elsewhere stays (it only slows). */
  async succeeded(ip: string, username: string): Promise<void> {
    this.#localPairs.reset(`${username}\0${ip}`);
    await this.#shared(async () => {
      await this.bus.clearRateLimit(key('pair', username, ip));
      return undefined;
    });
  }

  /** Seconds to wait by the shared count; 0 when it allows, or cannot answer (logged). */
  async #shared(call: () => Promise<{ allowed: boolean; retryAfterMs: number } | undefined>): Promise<number> {
    try {
      const result = await call();
      return result && !result.allowed ? Math.max(1, Math.ceil(result.retryAfterMs / 1000)) : 0;
    } catch (err) {
      if (Date.now() - this.#lastWarning >= WARN_EVERY_MS) {
        this.#lastWarning = Date.now();
        this.logger.warn({ err }, 'login attempts are counted per replica only: the shared counter (the bus) does not answer');
      }
      return 0;
    }
  }
}
