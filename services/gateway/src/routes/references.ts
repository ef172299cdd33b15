import { audienceAllows } from '@agentry/contracts';
import { getRuleChain, listRuleChainsMentioning, type Db } from '@agentry/db';
import { Errors } from '@agentry/errors';
import { chainSharing, definitionReferences, holdsSecrets, ownerIsAdmin, refusal, type Capability, type RunAuthority } from '@agentry/definitions';
import type { Principal } from '../auth/credentials.js';
import { mayChange } from '../auth/ownership.js';

/**
 * References are owned (README, "Sharing and references"). A definition may name only chains
 * and agents that exist (a dangling id could later be created by another user, whose chain would
 * then run inside this one's runs), and another user's only when that user shared it with the
 * definition's owner: the same policy (`refusal`) the run asks when it enters the reference, asked
 * here as early feedback. Deleting what other definitions name is refused for the same reason.
 */

/**
 * 400 naming the field and id of a reference to nothing (or an agent tool naming a rule chain);
 * 403 with the policy's sentence for another user's definition not shared with `owner`.
 * `selfId`: the definition being saved, which may name itself (the run refuses the cycle).
 */
export async function checkReferences(db: Db, dsl: unknown, owner: string, selfId: string): Promise<void> {
  const refs = definitionReferences(dsl).filter((r) => r.id !== selfId);
  if (refs.length === 0) return;
  const admin = await ownerIsAdmin(db, owner);
  const authority: RunAuthority = { principal: `user:${owner}`, agentOwner: owner, owner, admin };
  const missing: string[] = [];
  const refused: string[] = [];
  for (const ref of refs) {
    const row = await getRuleChain(db, ref.id);
    if (!row) {
      missing.push(`${ref.path}: ${ref.target === 'agent' ? 'agent' : 'rule chain'} "${ref.id}" does not exist; create it first`);
      continue;
    }
    if (ref.target === 'agent' && row.kind !== 'agent') {
      missing.push(`${ref.path}: "${ref.id}" is a rule chain, not an agent; use a tool of type rulechain`);
      continue;
    }
    const sharing = chainSharing((row.dsl as { ruleChain?: { configuration?: unknown } } | null)?.ruleChain?.configuration, owner);
    const shared = ref.target === 'agent' ? audienceAllows(row.audience, row.owner, `user:${owner}`, admin ? 'admin' : 'user') : sharing.shared;
    const cap: Capability = { kind: 'reference', target: ref.target, id: ref.id, owner: row.owner, shared, lends: sharing.lends, secrets: holdsSecrets(row.dsl) };
    const why = refusal(authority, cap);
    if (why !== undefined) refused.push(`${ref.path}: ${why}`);
  }
  if (missing.length > 0) throw new Errors.VALIDATION(missing.join('; '));
  if (refused.length > 0) throw new Errors.FORBIDDEN(refused.join('; '));
}

/**
 * 409 when definitions other than `ids` name one of them: the ids of those `p` may see (every
 * agent and global chain, and its own or, for an admin, every agent-level rule), a count of the
 * rest. `what` names the definition being deleted.
 */
export async function assertUnreferenced(db: Db, p: Principal, ids: readonly string[], what: string): Promise<void> {
  const candidates = await listRuleChainsMentioning(db, ids);
  const naming = candidates.filter((row) => definitionReferences(row.dsl).some((r) => ids.includes(r.id)));
  if (naming.length === 0) return;
  const seen = naming.filter((row) => row.agentId === null || mayChange(p, row.owner));
  const hidden = naming.length - seen.length;
  const named = seen.map((row) => `${row.kind === 'agent' ? 'agent' : 'rule chain'} "${row.id}"`);
  if (hidden > 0) named.push(`${hidden} definition${hidden === 1 ? '' : 's'} of other users`);
  throw new Errors.IN_USE(`${what} is used by ${named.join(', ')}; remove those references first (a deleted id could be created again by anyone)`);
}
