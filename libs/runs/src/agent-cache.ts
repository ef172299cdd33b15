import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { getRuleChain, listSkills, type Db, type RuleChainRow, type SkillRow } from '@agentry/db';

/** The pub/sub side of runtime's `Bus` as this needs it. */
interface InvalidateSource {
  subscribe(channel: typeof PubSubChannels.invalidate, handler: (message: InvalidateMessage) => void): Promise<() => Promise<void>>;
}

interface InvalidatedCacheOptions<T> {
  /** Reads the value of an id; `undefined` (nothing there) is never cached. */
  load: (id: string) => Promise<T | undefined>;
  /** The `invalidate` areas whose messages drop entries (`{area, id}` one, `{area}` all). */
  areas: ReadonlyArray<InvalidateMessage['area']>;
  /** A cached value is read again after this long even without an invalidation (default 5 s). */
  ttlMs?: number;
  now?: () => number;
}

interface Entry<T> {
  value: T;
  at: number;
}

/**
 * Values read from the database on the chat path, kept per process until an `invalidate {area,
 * id}` message (published by the gateway after every write, heard by every replica) or the safety
 * TTL, whichever comes first. A load that started before an invalidation does not store its
 * (possibly stale) result; concurrent gets of one id share one load.
 */
export class InvalidatedCache<T> {
  readonly #entries = new Map<string, Entry<T>>();
  /**
   * Loads in flight. `invalidate` marks one stale so that it does not store its result; nothing
   * about an id outlives its load (a per-id counter would keep every id ever invalidated, and
   * agents come and go by the thousand).
   */
  readonly #loading = new Map<string, { promise: Promise<T | undefined>; stale: boolean }>();
  readonly #opts: InvalidatedCacheOptions<T>;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(opts: InvalidatedCacheOptions<T>) {
    this.#opts = opts;
    this.#ttlMs = opts.ttlMs ?? 5_000;
    this.#now = opts.now ?? Date.now;
  }

  async get(id: string): Promise<T | undefined> {
    const cached = this.#entries.get(id);
    if (cached && this.#now() - cached.at < this.#ttlMs) return cached.value;
    const running = this.#loading.get(id);
    if (running) return running.promise;
    const at = this.#now();
    const load = { stale: false, promise: undefined as unknown as Promise<T | undefined> };
    load.promise = this.#opts
      .load(id)
      .then((value) => {
        if (value !== undefined && !load.stale) this.#entries.set(id, { value, at });
        else if (!load.stale) this.#entries.delete(id);
        return value;
      })
      .finally(() => {
        if (this.#loading.get(id) === load) this.#loading.delete(id);
      });
    this.#loading.set(id, load);
    return load.promise;
  }

  /** Drops one id (or every id without one); the next `get` reads it again. */
  invalidate(id?: string): void {
    if (id === undefined) {
      for (const load of this.#loading.values()) load.stale = true;
      this.#loading.clear();
      this.#entries.clear();
      return;
    }
    const load = this.#loading.get(id);
    if (load) load.stale = true;
    this.#loading.delete(id);
    this.#entries.delete(id);
  }

  /** Follows the `invalidate` messages of the cache's areas; resolves to the unsubscribe function. */
  async follow(pubsub: InvalidateSource): Promise<() => Promise<void>> {
    return pubsub.subscribe(PubSubChannels.invalidate, (m) => {
      if (this.#opts.areas.includes(m.area)) this.invalidate(m.id);
    });
  }

  get size(): number {
    return this.#entries.size;
  }
}

interface AgentCacheOptions {
  /** Reads an agent's row (default: `getRuleChain`). */
  load?: (id: string) => Promise<RuleChainRow | undefined>;
  ttlMs?: number;
  now?: () => number;
}

/**
 * Agent rows (`rule_chains` of kind `agent`; callers check `kind`), dropped on `invalidate
 * {area:'agents', id}`. A missing agent is not cached: a just created agent is found at once.
 */
export class AgentCache extends InvalidatedCache<RuleChainRow> {
  constructor(db: Db, opts: AgentCacheOptions = {}) {
    super({ areas: ['agents'], load: opts.load ?? ((id) => getRuleChain(db, id)), ...(opts.ttlMs !== undefined ? { ttlMs: opts.ttlMs } : {}), ...(opts.now ? { now: opts.now } : {}) });
  }
}

/**
 * The skills an agent sees (its own and the global ones, every status: the prompt picks), by
 * agent id, dropped on `invalidate {area:'skills', id: agentId}` (a global skill changed: no id,
 * every agent) and on any change of the agent itself (deleted and made again under its id).
 * Kept 30 s at most should a message be missed: a skill changes rarely, and the read is on the
 * path to every run's first token.
 */
export class SkillsCache extends InvalidatedCache<SkillRow[]> {
  constructor(db: Db, opts: { ttlMs?: number } = {}) {
    super({ areas: ['skills', 'agents'], load: (agentId) => listSkills(db, { scope: 'all', agentId }), ttlMs: opts.ttlMs ?? 30_000 });
  }
}

/**
 * Whether an agent's owner holds admin powers (the worker passes `ownerIsAdmin` of
 * @agentry/definitions as `load`), by owner, read once per process instead of once per run.
 * Dropped whole on any `invalidate {area: users|config}` (a role, a disabled flag or the
 * configured users changed; the message may name an account rather than the owner) and after
 * 5 s should a message be missed: the same window the gateway's key cache gives a demoted user.
 */
export class OwnerAdminCache extends InvalidatedCache<{ admin: boolean }> {
  constructor(load: (owner: string) => Promise<boolean>, opts: { ttlMs?: number; now?: () => number } = {}) {
    super({ areas: ['users', 'config'], load: async (owner) => ({ admin: await load(owner) }), ...opts });
  }

  override async follow(pubsub: InvalidateSource): Promise<() => Promise<void>> {
    return super.follow({ subscribe: (channel, handler) => pubsub.subscribe(channel, (m) => handler({ area: m.area })) });
  }

  async isAdmin(owner: string): Promise<boolean> {
    return (await this.get(owner))?.admin ?? false;
  }
}
