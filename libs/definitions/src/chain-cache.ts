import type { RuleChainDsl, RuleConnection, RuleNode } from './dsl.js';
import { validateRuleChain } from './validate.js';
import { chainVars } from './chain-vars.js';

/** A chain parsed and checked, ready for the engine to run (`parseChain`, `ChainCache`). */
export interface ParsedChain {
  id: string;
  name: string;
  dsl: RuleChainDsl;
  nodes: ReadonlyMap<string, RuleNode>;
  /** Where a run starts: `firstNodeIndex` (default 0); undefined for a chain without nodes. */
  firstNodeId: string | undefined;
  /** Connections leaving each node, in DSL order. */
  outgoing: ReadonlyMap<string, readonly RuleConnection[]>;
  /** `ruleChain.configuration.vars` as text: what `${vars.x}` in node configurations reads. */
  vars?: Readonly<Record<string, string>>;
  /** The stored row's owner (username), when the chain was loaded from the database. */
  owner?: string;
  /** The stored row holds credentials (`holdsSecrets`): it runs for another owner only when lent. */
  secrets?: boolean;
  /** The stored row's creation and last save (ms): whether a reference predates what it names. */
  createdAt?: number;
  savedAt?: number;
}

/** `warnings`: the chain's unknown node-configuration fields, kept as written (see `FieldValidation`). */
export type LoadResult = { ok: true; chain: ParsedChain; warnings?: string[] } | { ok: false; error: string };

/** A chain as storage hands it over: the DSL plus a version that changes with every write. */
export interface StoredChain {
  id: string;
  dsl: unknown;
  /** Typically `updated_at` in ms; a differing version makes `admit` parse again. */
  version?: string | number;
  /** Agents must keep an `ai/agent` node. */
  isAgent?: boolean;
}

type ChainStatus = { state: 'loaded' } | { state: 'error'; error: string } | { state: 'unloaded' };

/** Parses and validates one stored chain (no caching). */
export function parseChain(stored: StoredChain): LoadResult {
  // A stored chain may keep fields its node types do not name (saved under Warn or Ignore): they
  // load, and are reported to whoever asks (reload, the rule list).
  const result = validateRuleChain(stored.dsl, { requireAgent: stored.isAgent, fieldValidation: 'Warn' });
  if (!result.ok) return { ok: false, error: result.errors.join('; ') };
  const dsl = stored.dsl as RuleChainDsl;
  if (dsl.ruleChain.id !== stored.id) {
    return { ok: false, error: `ruleChain.id "${dsl.ruleChain.id}" differs from the stored id "${stored.id}"` };
  }
  const nodes = new Map(dsl.metadata.nodes.map((n) => [n.id, n]));
  const outgoing = new Map<string, RuleConnection[]>();
  for (const c of dsl.metadata.connections) {
    const list = outgoing.get(c.fromId) ?? [];
    list.push(c);
    outgoing.set(c.fromId, list);
  }
  const first = dsl.metadata.nodes[dsl.metadata.firstNodeIndex ?? 0];
  const chain = { id: stored.id, name: dsl.ruleChain.name, dsl, nodes, firstNodeId: first?.id, outgoing, vars: chainVars(dsl) };
  return result.warnings.length > 0 ? { ok: true, chain, warnings: result.warnings } : { ok: true, chain };
}

interface Entry {
  version: string | number | undefined;
  result: LoadResult;
}

/**
 * The chains one replica has parsed, by id. A chain is parsed and validated once and then
 * served from memory until `invalidate(id)` (called locally after a write and on every
 * replica by the `invalidate {area:'agents', id}` pub/sub message) or a newer version is
 * admitted. A chain that fails to load is cached too, with its error, so that status reports
 * show it and a broken chain is not parsed again on every request.
 */
export class ChainCache {
  readonly #entries = new Map<string, Entry>();
  /**
   * Loads in flight. `invalidate` marks one stale so that it does not store its result; nothing
   * about an id outlives its load (a per-id counter would keep every id ever invalidated).
   */
  readonly #loading = new Map<string, { promise: Promise<LoadResult | undefined>; stale: boolean }>();

  /** `source` reads a chain from storage (undefined when there is none); needed by `get`. */
  constructor(private readonly source?: (id: string) => Promise<StoredChain | undefined>) {}

  /**
   * The cached result for a chain the caller already holds, parsing it when it is not cached
   * or cached at another version.
   */
  admit(stored: StoredChain): LoadResult {
    const cached = this.#entries.get(stored.id);
    if (cached && (stored.version === undefined || cached.version === stored.version)) return cached.result;
    const result = parseChain(stored);
    this.#entries.set(stored.id, { version: stored.version, result });
    return result;
  }

  /** The cached result, else loaded through `source`; undefined when the chain does not exist. */
  async get(id: string): Promise<LoadResult | undefined> {
    const cached = this.#entries.get(id);
    if (cached) return cached.result;
    const running = this.#loading.get(id);
    if (running) return running.promise;
    const source = this.source;
    if (!source) throw new Error('ChainCache.get needs a source');
    const load = { stale: false, promise: undefined as unknown as Promise<LoadResult | undefined> };
    load.promise = source(id)
      .then((stored) => {
        if (!stored) return undefined;
        const result = parseChain(stored);
        if (!load.stale) this.#entries.set(id, { version: stored.version, result });
        return result;
      })
      .finally(() => {
        if (this.#loading.get(id) === load) this.#loading.delete(id);
      });
    this.#loading.set(id, load);
    return load.promise;
  }

  /** Drops the cached copy; the next `get` or `admit` parses again. True when one was cached. */
  invalidate(id: string): boolean {
    const running = this.#loading.get(id);
    if (running) running.stale = true;
    this.#loading.delete(id);
    return this.#entries.delete(id);
  }

  clear(): void {
    for (const id of this.#entries.keys()) this.invalidate(id);
  }

  /** loaded (parsed without error), error (with its message) or unloaded (not in this cache). */
  status(id: string): ChainStatus {
    const entry = this.#entries.get(id);
    if (!entry) return { state: 'unloaded' };
    return entry.result.ok ? { state: 'loaded' } : { state: 'error', error: entry.result.error };
  }

  get size(): number {
    return this.#entries.size;
  }
}
