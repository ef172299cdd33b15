import type { ReloadResult } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { validateRuleChain, type ChainCache, type LoadResult, type RuleChainDsl, type StoredChain } from '@agentry/engine';
import type { RuleChainRow } from '@agentry/db';

/** What the agent and rule routes share: this replica's chain cache and change notification. */
export interface ChainRoutes {
  cache: ChainCache;
  /** After a commit: drop the chains here and tell every other replica to. */
  changed(ids: readonly string[]): Promise<void>;
  /** Drops a chain on every replica, then loads it again here: what reload answers. */
  reload(row: RuleChainRow): Promise<LoadResult>;
}

export function storedChain(row: RuleChainRow): StoredChain {
  return { id: row.id, dsl: row.dsl, version: row.updatedAt.getTime(), isAgent: row.kind === 'agent' };
}

/** 400 listing every problem of a DSL (each naming its node or connection). */
export function assertValidChain(dsl: unknown, isAgent: boolean): asserts dsl is RuleChainDsl {
  const result = validateRuleChain(dsl, { requireAgent: isAgent });
  if (!result.ok) throw new Errors.VALIDATION(result.errors.join('; '));
}

/** `{success: true}`, or `{success: false, message}` when the chain fails to load. */
export function reloadAnswer(result: LoadResult): ReloadResult {
  return result.ok ? { success: true } : { success: false, message: result.error };
}

/** The DSL of a PUT: the path's id wins; a different id in the body is a 400. */
export function withPathId(body: { ruleChain: { id?: string } & Record<string, unknown>; metadata: unknown }, id: string): RuleChainDsl {
  if (body.ruleChain.id !== undefined && body.ruleChain.id !== id) {
    throw new Errors.VALIDATION(`ruleChain.id "${body.ruleChain.id}" does not match the id in the path ("${id}")`);
  }
  const ruleChain = body.ruleChain.id === undefined ? { id, ...body.ruleChain } : body.ruleChain;
  return { ...body, ruleChain } as RuleChainDsl;
}

/**
 * The serializer of every route answering a DSL (or part of one): plain JSON.stringify. A chain
 * is answered exactly as it was written, key order included (editors and `git diff` of exported
 * chains rely on it), and a schema-driven serializer writes the declared keys first. The route's
 * response schema still documents the answer and types its handler; the DSL's schemas are open at
 * every level, so serializing with them would send the same keys, only reordered.
 */
export function serializeAsWritten(): (data: unknown) => string {
  return (data) => JSON.stringify(data);
}
