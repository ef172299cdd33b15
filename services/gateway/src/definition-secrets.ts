import { redactDefinition, sealDefinition, sealStoredPlaintext, type RuleChainDsl } from '@agentry/definitions';
import { listRuleChains, replaceRuleChainDslIfUnchanged, type JsonValue } from '@agentry/db';
import type { GatewayDeps } from './deps.js';

/**
 * The gateway's side of secrets inside definitions (the rule and the marker are in
 * `@agentry/definitions` `definition-secrets.ts`): every write of an agent or rule chain goes
 * through `sealIncoming`, every read through `redacted`, and the start-up pass seals rows
 * stored before secrets were sealed.
 */

/** The DSL to store: secrets sealed, markers resolved against the stored DSL (on update). */
export function sealIncoming<T extends RuleChainDsl>(deps: Pick<GatewayDeps, 'secrets'>, dsl: T, stored?: JsonValue): T {
  return sealDefinition(dsl, stored, deps.secrets) as T;
}

/** The DSL as a client may see it: the marker in place of every secret. */
export function redacted<T>(dsl: T): T {
  return redactDefinition(dsl);
}

/**
 * Seals plain-text secrets of chains stored before this release (or by an older replica). It
 * needs the master key, which migrations must not touch, so it runs at start-up instead. Each
 * row is written only if it still has the `updated_at` it was read with: a user's concurrent
 * update is never overwritten, and another replica running the same pass writes the row at
 * most once (after that the row has nothing to seal). Answers how many rows it sealed.
 */
export async function sealStoredDefinitions(deps: Pick<GatewayDeps, 'db' | 'secrets' | 'logger'>): Promise<number> {
  const db = deps.db.db;
  let sealed = 0;
  for (const row of await listRuleChains(db)) {
    const { dsl, changed } = sealStoredPlaintext(row.dsl, deps.secrets);
    if (!changed) continue;
    if (await replaceRuleChainDslIfUnchanged(db, row.id, row.updatedAt, dsl as JsonValue)) sealed++;
  }
  if (sealed > 0) deps.logger.info({ chains: sealed }, 'sealed plain-text secrets stored in agent and rule-chain definitions');
  return sealed;
}
