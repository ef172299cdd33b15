import Type, { type Static } from 'typebox';

/**
 * Who may chat with an agent besides its owner and the admins (who always may). Chatting with an
 * agent hands out everything its tools can do, so an agent is shared on purpose: `everyone`, or
 * named users (usernames), roles (`user`, `admin`) and api accounts (account ids).
 */
export const AgentAudience = Type.Object(
  {
    everyone: Type.Boolean(),
    users: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 1000 }),
    roles: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 }),
    apiAccounts: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 1000 }),
  },
  { additionalProperties: false },
);
export type AgentAudience = Static<typeof AgentAudience>;

/** Today's audience of every agent made before audiences, and of an admin's (or an open server's) new agents. */
export const AUDIENCE_EVERYONE: AgentAudience = Object.freeze({ everyone: true, users: [], roles: [], apiAccounts: [] }) as AgentAudience;
/** A plain user's new agent: its owner and the admins only, until shared. */
export const AUDIENCE_PRIVATE: AgentAudience = Object.freeze({ everyone: false, users: [], roles: [], apiAccounts: [] }) as AgentAudience;

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((x): x is string => typeof x === 'string') : []);

/**
 * The audience a stored value (a jsonb column) says. Anything unreadable is private: a damaged
 * row must not open an agent to everyone.
 */
export function audienceOf(value: unknown): AgentAudience {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return AUDIENCE_PRIVATE;
  const v = value as Record<string, unknown>;
  return { everyone: v.everyone === true, users: strings(v.users), roles: strings(v.roles), apiAccounts: strings(v.apiAccounts) };
}

const CHANNEL_PEER_PREFIX = 'channel:';

/**
 * The principal of a run started by a message in a chat: the peer who wrote it, on the account it
 * came through (`channel:<platform>:<accountId>:<senderId>`). It names no user of ours, so it is
 * nobody's owner and no admin; its usage shows under it (`GET /usage?groupBy=principal`).
 */
export function channelPeerPrincipal(platform: string, accountId: string, senderId: string): string {
  return `${CHANNEL_PEER_PREFIX}${platform}:${accountId}:${senderId}`;
}

/** The chat account a channel peer wrote through (`channelPeerPrincipal` read back), or undefined for any other principal. */
export function channelAccountOfPeer(principal: string): { platform: string; accountId: string } | undefined {
  if (!principal.startsWith(CHANNEL_PEER_PREFIX)) return undefined;
  const [platform, accountId, ...sender] = principal.slice(CHANNEL_PEER_PREFIX.length).split(':');
  return platform && accountId && sender.length > 0 ? { platform, accountId } : undefined;
}

/** Is this run principal a channel peer (`channelPeerPrincipal`)? */
export function isChannelPeerPrincipal(principal: string): boolean {
  return principal.startsWith(CHANNEL_PEER_PREFIX) && principal.length > CHANNEL_PEER_PREFIX.length;
}

/**
 * May `principal` chat with (and so use the tools of) an agent owned by `agentOwner`? The one
 * decision for the gateway (`/models`, chat, Responses, cron targets, bindings) and the engine
 * (sub-agent calls, heartbeats). `principal` is a run's principal: `user:<name>`, `api:<account>`,
 * a channel peer (`channelPeerPrincipal`) or '' (neither: refused unless the agent is shared with everyone); `role` is the user's
 * role when the principal is a user (`admin` always may). Pure: no I/O.
 */
export function audienceAllows(audience: unknown, agentOwner: string, principal: string, role?: string): boolean {
  if (role === 'admin') return true;
  if (principal === `user:${agentOwner}`) return true;
  const a = audienceOf(audience);
  if (a.everyone) return true;
  if (principal.startsWith('user:')) {
    const name = principal.slice('user:'.length);
    return a.users.includes(name) || (role !== undefined && a.roles.includes(role));
  }
  if (principal.startsWith('api:')) return a.apiAccounts.includes(principal.slice('api:'.length));
  return false;
}
