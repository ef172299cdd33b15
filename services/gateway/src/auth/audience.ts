import { AUDIENCE_EVERYONE, AUDIENCE_PRIVATE, audienceAllows, audienceOf, type AgentAudience } from '@agentry/contracts';
import { SEALED_PREFIX } from '@agentry/definitions';
import { listRuleChains, type Db, type RuleChainRow } from '@agentry/db';
import { Errors } from '@agentry/errors';
import type { Logger } from 'pino';
import type { Principal } from './credentials.js';
import { NETWORK_OPENERS, eachObject, isBuiltinToolEntry, opens } from './auth.js';
import { isAdmin, sessionOwner } from './ownership.js';

/**
 * The gateway's side of agent audiences: the decision itself is `audienceAllows` in
 * `@agentry/contracts`, shared with the engine.
 */

/** May `p` chat with (and so use every tool of) this agent? */
export function mayChatWith(p: Principal, agent: Pick<RuleChainRow, 'owner' | 'audience'>): boolean {
  if (isAdmin(p)) return true;
  return audienceAllows(agent.audience, agent.owner, sessionOwner(p), p.kind === 'user' ? p.role : undefined);
}

/**
 * 403 unless `p` may chat with the agent. It names only the id the caller sent and says why
 * (an agent's existence is no secret: every user may list agents).
 */
export function assertMayChat(p: Principal, agent: Pick<RuleChainRow, 'id' | 'owner' | 'audience'>): void {
  if (p.kind === 'account' && p.agents && !p.agents.includes(agent.id)) {
    throw new Errors.FORBIDDEN(`api account "${p.accountId}" is bound to ${p.agents.map((a) => `"${a}"`).join(', ')}, not to agent "${agent.id}"`);
  }
  if (!mayChatWith(p, agent)) throw new Errors.FORBIDDEN(`agent "${agent.id}" is not shared with you; its owner or an admin may share it (PUT /api/v1/agents/${agent.id}/audience)`);
}

/**
 * A new agent's audience: everyone for an admin's agents and on a server without
 * `security.requireAuth` (the spec's flow: an admin makes an agent, OpenAI clients chat with it);
 * a plain user's stay private to their owner and the admins until shared.
 */
export function newAgentAudience(p: Principal, requireAuth: boolean): AgentAudience {
  return !requireAuth || isAdmin(p) ? AUDIENCE_EVERYONE : AUDIENCE_PRIVATE;
}

/**
 * The powers of an agent's definition that whoever may chat with it can use: `bash`, `private
 * network` (a switch lifting the outbound address policy), `channel sends` (send_message) and
 * `sealed secrets` (credentials its requests carry). Bounded like findAdminOnlySetting; a
 * definition too large to read whole counts as holding everything unseen.
 */
export function dangerousPowers(dsl: unknown): string[] {
  const found = new Set<string>();
  const complete = eachObject(dsl, (record) => {
    if (isBuiltinToolEntry(record, 'bash')) found.add('bash');
    if (isBuiltinToolEntry(record, 'send_message')) found.add('channel sends');
    if (NETWORK_OPENERS.some((key) => opens(record[key]))) found.add('private network');
    if (Object.values(record).some((v) => typeof v === 'string' && v.startsWith(SEALED_PREFIX))) found.add('sealed secrets');
    return true;
  });
  if (!complete) found.add('unchecked (too large)');
  return [...found].sort();
}

/** The `Warning` header (RFC 9111's 299, "miscellaneous persistent warning") for an agent shared with everyone that holds dangerous powers. */
export function everyoneWarning(agent: { id: string; audience: unknown; dsl: unknown }): string | undefined {
  if (!audienceOf(agent.audience).everyone) return undefined;
  const powers = dangerousPowers(agent.dsl);
  if (powers.length === 0) return undefined;
  const text = `agent "${agent.id}" is shared with everyone and holds ${powers.join(', ')}: whoever may chat with it may use them; share it with fewer (PUT /api/v1/agents/${agent.id}/audience)`;
  return `299 agentry "${text.replace(/["\\]/g, '')}"`;
}

/** The start-up line naming agents shared with everyone that hold a dangerous power (at most one line). */
export async function warnSharedPowers(db: Db, logger: Logger): Promise<void> {
  const risky = (await listRuleChains(db, { kind: 'agent' }))
    .filter((a) => audienceOf(a.audience).everyone)
    .map((a) => ({ id: a.id, powers: dangerousPowers(a.dsl) }))
    .filter((a) => a.powers.length > 0);
  if (risky.length === 0) return;
  logger.warn(
    { agents: risky },
    `agents shared with everyone hold dangerous powers (${risky.map((a) => `${a.id}: ${a.powers.join(', ')}`).join('; ')}): whoever may chat with them may use them; narrow their audience (PUT /api/v1/agents/{id}/audience)`,
  );
}
