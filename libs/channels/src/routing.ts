import { agentBoundTo, type Db } from '@agentry/db';
import type { AccountContext, InboundMessage } from './adapter.js';

/** The values `dm_policy` and `group_policy` take. */
export const POLICIES = ['allow', 'allowlist', 'disabled'] as const;
export type Policy = (typeof POLICIES)[number];

/** How inbound conversations map to sessions (the account's `session_scope`, default `per_peer`). */
export const SESSION_SCOPES = ['per_peer', 'main', 'per_channel_peer', 'per_account_channel_peer'] as const;
export type SessionScope = (typeof SESSION_SCOPES)[number];

export function isPolicy(value: unknown): value is Policy {
  return typeof value === 'string' && (POLICIES as readonly string[]).includes(value);
}

export function isSessionScope(value: unknown): value is SessionScope {
  return typeof value === 'string' && (SESSION_SCOPES as readonly string[]).includes(value);
}

export type PolicyDecision = { admitted: true } | { admitted: false; reason: string };

/**
 * Applies the account's policy for the kind of chat the message came from. Unset means `allow`.
 * An allowlist admits a sender listed in `allow_from`, or (for groups) the group's chat id.
 */
export function applyPolicy(account: Pick<AccountContext, 'settings'>, message: Pick<InboundMessage, 'chatType' | 'senderId' | 'chatId'>): PolicyDecision {
  const field = message.chatType === 'dm' ? 'dm_policy' : 'group_policy';
  const raw = account.settings[field];
  const policy: Policy = isPolicy(raw) ? raw : 'allow';
  switch (policy) {
    case 'allow':
      return { admitted: true };
    case 'disabled':
      return { admitted: false, reason: `${field} is disabled` };
    case 'allowlist': {
      const allow = Array.isArray(account.settings.allow_from) ? (account.settings.allow_from as unknown[]).map(String) : [];
      const listed = allow.includes(message.senderId) || (message.chatType === 'group' && allow.includes(message.chatId));
      return listed ? { admitted: true } : { admitted: false, reason: `${message.senderId} is not in allow_from (${field} is allowlist)` };
    }
    default: {
      const never: never = policy;
      return { admitted: false, reason: `unknown policy ${String(never)}` };
    }
  }
}

export interface BindingLike {
  agentId: string;
  match: { default?: boolean; channel?: string; accountId?: string };
}

/**
 * The binding for messages of an account: the most specific wins (this account, then any
 * account of this platform, then the default binding); among equals, the first listed.
 */
export function resolveBinding<B extends BindingLike>(bindings: readonly B[], platform: string, accountId: string): B | undefined {
  return (
    bindings.find((b) => b.match.channel === platform && b.match.accountId === accountId) ??
    bindings.find((b) => b.match.channel === platform && b.match.accountId === undefined) ??
    bindings.find((b) => b.match.default === true)
  );
}

/**
 * The session a message belongs to. The peer is the sender in a DM and the group in a group
 * chat (a group shares one conversation). `main` puts every chat of the agent on this platform
 * in one session; the longer scopes keep two accounts (or platforms) apart.
 */
export function sessionKeyFor(scope: SessionScope, platform: string, accountId: string, message: Pick<InboundMessage, 'chatType' | 'senderId' | 'chatId'>): string {
  const peer = message.chatType === 'dm' ? `dm:${message.senderId}` : `group:${message.chatId}`;
  switch (scope) {
    case 'main':
      return 'main';
    case 'per_peer':
      return peer;
    case 'per_channel_peer':
      return `${platform}:${peer}`;
    case 'per_account_channel_peer':
      return `${platform}:${accountId}:${peer}`;
    default: {
      const never: never = scope;
      return String(never);
    }
  }
}

/** Builds the adapter's view of an account from its stored settings and sealed secrets. */
export function accountContext(
  record: { platform: string; id: string; settings: Record<string, unknown>; secretsSealed: string | null },
  sealer: { open(sealed: string): string },
): AccountContext {
  const secrets = record.secretsSealed ? (JSON.parse(sealer.open(record.secretsSealed)) as Record<string, string>) : {};
  return { platform: record.platform as AccountContext['platform'], accountId: record.id, settings: record.settings, secrets };
}

/**
 * May `agentId` send through `platform`/`accountId` on its own (the send_message tool, a cron
 * job's `deliver`)? Only when an admin bound that account, or the whole platform, to that agent:
 * bindings are admin-only, so a user cannot point an agent at an account that was not given to
 * it. Replies to the chat a message came from need no such binding (they answer the sender).
 */
export function agentMaySendThrough(db: Db, agentId: string, platform: string, accountId: string): Promise<boolean> {
  return agentBoundTo(db, agentId, platform, accountId);
}

/** The human refusal of agentMaySendThrough. */
export function notBoundMessage(agentId: string, platform: string, accountId: string): string {
  return `agent "${agentId}" may not send through ${platform} account "${accountId}": no binding connects them (an admin adds one with PUT /api/v1/bindings)`;
}

/**
 * May an agent's own message (a cron job's `deliver`) go to `chatId` of this account? The account
 * admits a chat the way it admits an inbound one: an account whose dm and group policies are
 * both closed (an allowlist, or disabled) reaches only the chats its `allow_from` lists, so a
 * user cannot aim a bound bot at any chat id of their choosing. One kind open to everyone admits
 * any id (whether an id is a direct or a group chat is not known here). Null when allowed, else why not.
 */
export function deliverChatRefusal(account: Pick<AccountContext, 'settings'> & { id: string }, platform: string, chatId: string): string | null {
  const policies = (['dm_policy', 'group_policy'] as const).map((f) => (isPolicy(account.settings[f]) ? account.settings[f] : 'allow'));
  // Which kind a chat id is (direct or group) is not known here: one kind open to everyone admits it.
  if (policies.some((p) => p === 'allow')) return null;
  const allow = Array.isArray(account.settings.allow_from) ? (account.settings.allow_from as unknown[]).map(String) : [];
  if (allow.includes(chatId)) return null;
  return `chat "${chatId}" is not in the allow_from of ${platform} account "${account.id}"; this account reaches only the chats listed there`;
}
