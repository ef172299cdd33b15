import { Errors } from '@agentry/errors';
import { countRuleChains, countSessionsOfOwner, findSessionByKey, type Db } from '@agentry/db';
import type { AgentryConfig } from '@agentry/runtime';
import type { Principal } from './credentials.js';
import { isAdmin, sessionOwner } from './ownership.js';

/**
 * `security.quotas`: what one plain user may hold. Admins (and every caller of an open server)
 * are not held; api accounts are not users (their reach is their account's `agents` and budget).
 * A refusal is 409 `Limit reached: ...` naming the count, the limit and the setting.
 */
type Quotas = AgentryConfig['security']['quotas'];

/** The username the quotas count for, or undefined when `p` is not held by them. */
function heldUser(p: Principal): string | undefined {
  return p.kind === 'user' && !isAdmin(p) ? p.username : undefined;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** Before a user creates an agent: 409 when it already owns `agentsPerUser`. */
export async function assertAgentQuota(db: Db, quotas: Quotas, p: Principal): Promise<void> {
  const user = heldUser(p);
  if (user === undefined) return;
  const owned = await countRuleChains(db, { kind: 'agent', owner: user });
  if (owned >= quotas.agentsPerUser) {
    throw new Errors.QUOTA(`you already own ${plural(owned, 'agent')} (the limit is ${quotas.agentsPerUser}, security.quotas.agentsPerUser): delete one first`);
  }
}

/**
 * Before a chat opens a session: 409 when the session is new and the user already owns
 * `sessionsPerUser`. Going on in an existing session is never refused.
 */
export async function assertSessionQuota(db: Db, quotas: Quotas, p: Principal, session: { agentId: string; key: string; channel: string }): Promise<void> {
  const user = heldUser(p);
  if (user === undefined) return;
  const owner = sessionOwner(p);
  if (await findSessionByKey(db, { agentId: session.agentId, sessionKey: session.key, channel: session.channel, owner })) return;
  const owned = await countSessionsOfOwner(db, owner);
  if (owned >= quotas.sessionsPerUser) {
    throw new Errors.QUOTA(
      `you already have ${plural(owned, 'chat session')} (the limit is ${quotas.sessionsPerUser}, security.quotas.sessionsPerUser): delete old ones (DELETE /sessions/{id}) first`,
    );
  }
}

/** The byte limit of an agent's workspace when `p` writes to it through REST; undefined: none. */
export function workspaceByteLimit(quotas: Quotas, p: Principal): number | undefined {
  return heldUser(p) === undefined ? undefined : quotas.workspaceBytesPerAgent;
}
