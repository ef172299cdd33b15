import type { Logger } from 'pino';
import { budgetCounter, channelAccountOfPeer, isChannelPeerPrincipal } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { tokensPerDayOf, type Db } from '@agentry/db';
import type { Bus } from '@agentry/bus';
import { InvalidatedCache } from './agent-cache.js';

/** What a reserved model call does once it is over. */
export interface TokenReservation {
  /** The call ended with a usage: the counter gets (actual - reserved), negative allowed. */
  settle(actualTokens: number): Promise<void>;
  /** The call failed or was cancelled: the reservation is given back whole. */
  release(): Promise<void>;
}

const NOTHING_RESERVED: TokenReservation = { settle: async () => undefined, release: async () => undefined };

/**
 * A principal's `tokensPerDay` as stored, kept per process until its area changes
 * (`invalidate {area: users|apiKeys|channels|config}`, any id: the message names a user or an
 * account, the cache a principal) or 5 s pass.
 */
class DayLimits extends InvalidatedCache<{ limit: number | undefined }> {
  constructor(db: Db) {
    super({ areas: ['users', 'apiKeys', 'channels', 'config'], load: async (principal) => ({ limit: await tokensPerDayOf(db, principal) }) });
  }

  override async follow(pubsub: Parameters<InvalidatedCache<unknown>['follow']>[0]): Promise<() => Promise<void>> {
    return super.follow({ subscribe: (channel, handler) => pubsub.subscribe(channel, (m) => handler({ area: m.area })) });
  }
}

/** How often the "budget not enforced" warning may repeat while the counter does not answer. */
const WARN_EVERY_MS = 60_000;

/**
 * Token budgets at the model call: before each call of a principal with a `tokensPerDay`, an
 * estimate of the call (its prompt and its `max_tokens`, or `security.budgetReserveTokens`) is
 * reserved on the day's counter, the one the gateways check and the usage adds to; after the call
 * it is settled to the tokens the provider reported, and a call that fails gives it back. A call
 * starts only while the counter, with the reservations of the calls under way, is below the
 * limit, so parallel requests can no longer all pass one check and then all spend: past the
 * limit, each overshoots by at most its own call. One round trip to the counter per reservation
 * and per settlement. When the counter does not answer, the call goes through with a warning,
 * as chat's pre-check does.
 */
export class TokenBudgets {
  readonly #limits: DayLimits;
  #lastWarning = 0;

  constructor(
    private readonly deps: {
      db: Db;
      counter: Pick<Bus, 'reserve' | 'count'>;
      logger: Logger;
      /** `security.budgets.channelPeerTokensPerDay`, read at each call (0: none). */
      channelPeerTokensPerDay: () => number;
      /**
       * `security.budgets.channelAccountTokensPerDay`, read at each call (0: none): what all the
       * senders of one chat account spend together. Absent: not held (the gateway's forced
       * compaction, until it moves to the worker).
       */
      channelAccountTokensPerDay?: () => number;
    },
  ) {
    this.#limits = new DayLimits(deps.db);
  }

  /** Follows budget changes announced on the bus; resolves to the unsubscribe function. */
  follow(pubsub: Parameters<InvalidatedCache<unknown>['follow']>[0]): Promise<() => Promise<void>> {
    return this.#limits.follow(pubsub);
  }

  /**
   * The principal's `tokensPerDay`, undefined without one ('' never has one). A channel peer has
   * no entry of its own: each gets the configured per-peer day, so that anyone able to write to a
   * bound chat account spends at most that much a day (their usage shows under them).
   */
  async limitOf(principal: string): Promise<number | undefined> {
    if (!principal) return undefined;
    if (isChannelPeerPrincipal(principal)) {
      const perPeer = this.deps.channelPeerTokensPerDay();
      return perPeer > 0 ? perPeer : undefined;
    }
    return (await this.#limits.get(principal))?.limit;
  }

  /**
   * Reserves `estimate` tokens of the principal's day for one model call, or throws
   * RATE_LIMITED naming the budget and its reset when the day is spent. `limit` given: that
   * limit (the gateway knows it), else the stored one. A channel peer's call is held by its chat
   * account's day too (`channelAccountTokensPerDay`), so that many senders cannot spend without
   * end by each staying under their own.
   */
  async reserve(principal: string, estimate: number, limit?: number): Promise<TokenReservation> {
    if (!principal) return NOTHING_RESERVED;
    const own = await this.#reserveDay(principal, estimate, limit ?? (await this.limitOf(principal)), budgetSpent);
    const account = channelAccountOfPeer(principal);
    const perAccount = this.deps.channelAccountTokensPerDay?.() ?? 0;
    if (!account || perAccount <= 0) return own;
    let shared: TokenReservation;
    try {
      const spent = (_: string, max: number, resetsAt: Date, now?: number) => accountSpent(account, max, resetsAt, now);
      shared = await this.#reserveDay(`channel-account:${account.platform}:${account.accountId}`, estimate, perAccount, spent);
    } catch (err) {
      // The sender's own day gives back what this call will not spend.
      await own.release();
      throw err;
    }
    return {
      settle: async (actual) => void (await Promise.all([own.settle(actual), shared.settle(actual)])),
      release: async () => void (await Promise.all([own.release(), shared.release()])),
    };
  }

  /** One day's reservation on `counter` (a principal, or a chat account's day) under `max`. */
  async #reserveDay(counter: string, estimate: number, max: number | undefined, spent: typeof budgetSpent): Promise<TokenReservation> {
    const now = Date.now();
    const day = budgetCounter('tokensPerDay', counter, now);
    // Without a limit nothing is reserved, but the day is still counted: a budget set later today starts from what was spent.
    if (!max || max <= 0) return { settle: (actual) => this.#add(day, Math.max(0, Math.round(actual) || 0)), release: async () => undefined };
    const reserved = Math.max(1, Math.ceil(estimate));
    let granted: boolean;
    try {
      // Granted while what is spent and reserved stays below the limit (this call may cross it).
      ({ granted } = await this.deps.counter.reserve(day.key, reserved, max - 1 + reserved, day.ttlMs));
    } catch (err) {
      this.#warn(err);
      return NOTHING_RESERVED;
    }
    if (!granted) throw spent(counter, max, day.resetsAt, now);
    // The day the reservation was made in is the one it is settled in, even past midnight.
    let open = true;
    const once = (by: number) => {
      if (!open) return Promise.resolve();
      open = false;
      return this.#add(day, by);
    };
    return { settle: (actual) => once(Math.max(0, Math.round(actual) || 0) - reserved), release: () => once(-reserved) };
  }

  /** One add to the day's counter; a counter that does not answer is warned about, not thrown. */
  async #add(day: { key: string; ttlMs: number }, by: number): Promise<void> {
    if (by === 0) return;
    try {
      await this.deps.counter.count(day.key, by, day.ttlMs);
    } catch (err) {
      this.#warn(err);
    }
  }

  #warn(err: unknown): void {
    if (Date.now() - this.#lastWarning < WARN_EVERY_MS) return;
    this.#lastWarning = Date.now();
    this.deps.logger.warn({ err }, 'token budgets are not enforced: their counter (the bus) does not answer');
  }
}

/** The refusal a client reads: which budget, its size, and when it resets. */
export function budgetSpent(principal: string, limit: number, resetsAt: Date, now = Date.now()): InstanceType<typeof Errors.RATE_LIMITED> {
  const seconds = Math.max(1, Math.ceil((resetsAt.getTime() - now) / 1000));
  return new Errors.RATE_LIMITED(`the tokensPerDay budget of ${principal} (${limit} tokens per day) is spent; it resets at ${resetsAt.toISOString()} (in ${seconds} s)`);
}

/** The refusal a channel's sender reads when the whole chat account's day is spent (not theirs alone). */
export function accountSpent(account: { platform: string; accountId: string }, limit: number, resetsAt: Date, now = Date.now()): InstanceType<typeof Errors.RATE_LIMITED> {
  const seconds = Math.max(1, Math.ceil((resetsAt.getTime() - now) / 1000));
  return new Errors.RATE_LIMITED(
    `${account.platform} account "${account.accountId}" has spent its tokens for today across all its senders (security.budgets.channelAccountTokensPerDay: ${limit} tokens per day); it resets at ${resetsAt.toISOString()} (in ${seconds} s)`,
  );
}
