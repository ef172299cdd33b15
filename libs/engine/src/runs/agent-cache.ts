import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { getRuleChain, type Db, type RuleChainRow } from '@agentry/db';

/** The pub/sub side of runtime's `Bus` as this needs it. */
export interface InvalidateSource {
  subscribe(channel: string, handler: (message: unknown) => void): Promise<() => Promise<void>>;
}

export interface AgentCacheOptions {
  /** Reads an agent's row (default: `getRuleChain`). */
  load?: (id: string) => Promise<RuleChainRow | undefined>;
  /** A cached row is read again after this long even without an invalidation (default 5 s). */
  ttlMs?: number;
  now?: () => number;
}

interface Entry {
  row: RuleChainRow;
  at: number;
}

/**
 * Agent rows (`rule_chains` of kind `agent`) of one process, for the chat path: read once, then
 * served from memory until `invalidate {area:'agents', id}` (published by the gateway after every
 * write, on every replica) or the safety TTL, whichever comes first. A missing agent is not
 * cached (a just created agent must be found at once). A load that started before an
 * invalidation does not store its (possibly stale) result.
 */
export class AgentCache {
  readonly #entries = new Map<string, Entry>();
  readonly #generation = new Map<string, number>();
  readonly #loading = new Map<string, Promise<RuleChainRow | undefined>>();
  readonly #load: (id: string) => Promise<RuleChainRow | undefined>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  #epoch = 0;

  constructor(db: Db, opts: AgentCacheOptions = {}) {
    this.#load = opts.load ?? ((id) => getRuleChain(db, id));
    this.#ttlMs = opts.ttlMs ?? 5_000;
    this.#now = opts.now ?? Date.now;
  }

  /** The agent's row (any kind: callers check `kind`), or undefined when there is none. */
  async get(id: string): Promise<RuleChainRow | undefined> {
    const cached = this.#entries.get(id);
    if (cached && this.#now() - cached.at < this.#ttlMs) return cached.row;
    const running = this.#loading.get(id);
    if (running) return running;
    const generation = this.#generation.get(id) ?? 0;
    const epoch = this.#epoch;
    const at = this.#now();
    const load = this.#load(id)
      .then((row) => {
        const current = (this.#generation.get(id) ?? 0) === generation && this.#epoch === epoch;
        if (row && current) this.#entries.set(id, { row, at });
        else if (current) this.#entries.delete(id);
        return row;
      })
      .finally(() => {
        if (this.#loading.get(id) === load) this.#loading.delete(id);
      });
    this.#loading.set(id, load);
    return load;
  }

  /** Drops one agent (or every agent without an id); the next `get` reads it again. */
  invalidate(id?: string): void {
    if (id === undefined) {
      this.#epoch++;
      this.#entries.clear();
      this.#loading.clear();
      return;
    }
    this.#generation.set(id, (this.#generation.get(id) ?? 0) + 1);
    this.#loading.delete(id);
    this.#entries.delete(id);
  }

  /** Follows `invalidate {area:'agents'}` messages; resolves to the unsubscribe function. */
  async follow(pubsub: InvalidateSource): Promise<() => Promise<void>> {
    return pubsub.subscribe(PubSubChannels.invalidate, (message) => {
      const m = message as InvalidateMessage | null;
      if (m?.area === 'agents') this.invalidate(m.id);
    });
  }

  get size(): number {
    return this.#entries.size;
  }
}
