import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus, RateLimitRule } from '@agentry/bus';
import { RateLimiter } from './rate-limit.js';

/** Login attempts per client address. */
const BY_IP: RateLimitRule = { limit: 30, windowMs: 60_000 };
/** Failed logins per username; a success clears them. */
const FAILURES: RateLimitRule = { limit: 10, windowMs: 5 * 60_000 };
/** How often the "counted per replica only" warning may repeat while the bus stays away. */
const WARN_EVERY_MS = 60_000;

/** Hashed so that a bus key names no user and no address. */
function key(kind: 'ip' | 'user', who: string): string {
  return `login:${kind}:${createHash('sha256').update(who).digest('base64url').slice(0, 32)}`;
}

/**
 * Password-guessing limits counted twice: in the bus, shared by every gateway replica (Redis in
 * cluster mode, so N replicas do not give an attacker N budgets), and in this process. The
 * local count is the floor: while the bus does not answer, login still works and is still
 * limited, per replica, as before the shared count existed.
 */
export class LoginLimiter {
  readonly #localByIp = new RateLimiter(BY_IP.limit, BY_IP.windowMs);
  readonly #localFailures = new RateLimiter(FAILURES.limit, FAILURES.windowMs);
  #lastWarning = 0;

  constructor(
    private readonly bus: Pick<Bus, 'rateLimit' | 'clearRateLimit'>,
    private readonly logger: Logger,
  ) {}

  /** Counts one attempt from `ip`; answers the seconds to wait (0: go on). */
  async attempt(ip: string, username: string): Promise<number> {
    const local = this.#localByIp.hit(ip) || this.#localFailures.blocked(username);
    const [byIp, failures] = await Promise.all([
      this.#shared(() => this.bus.rateLimit(key('ip', ip), BY_IP)),
      this.#shared(() => this.bus.rateLimit(key('user', username), FAILURES, { peek: true })),
    ]);
    return Math.max(local, byIp, failures);
  }

  async failed(username: string): Promise<void> {
    this.#localFailures.hit(username);
    await this.#shared(() => this.bus.rateLimit(key('user', username), FAILURES));
  }

  async succeeded(username: string): Promise<void> {
    this.#localFailures.reset(username);
    await this.#shared(async () => {
      await this.bus.clearRateLimit(key('user', username));
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
