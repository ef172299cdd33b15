import { audienceAllows } from '@agentry/contracts';
import { getUser, type Db } from '@agentry/db';

/**
 * The authority model of a run, in one place (docs/reliability.md, "Authority"). A definition
 * grants nothing by being written: what a tool, a node or a reference may do is decided here, when
 * the engine builds or uses it, on the configuration as it will run (after `${vars}`, `${global}`,
 * `${metadata}` and defaults). The gateway's save-time check asks the same function on the same
 * resolution, so what it accepts is what runs.
 *
 * Admin-only powers (the bash tool, lifting the outbound-address policy, a sandboxed command's
 * network) belong to the owner of the definition that holds them, and only as far as the caller
 * had them: a chain or agent reached from another owner's agent runs with the smaller of the two
 * (an admin's chain run for a user's agent is a user's chain), unless its admin owner lent its
 * powers on purpose (`ruleChain.configuration.lendPowers`).
 */

/** Marks a schema field that grants authority: it may not be written as a `${...}` template. */
export const AUTHORITY = { 'x-authority': true } as const;

/** Who a run acts for, and with what powers, at the definition executing now. */
export interface RunAuthority {
  /**
   * Who asked: `user:<name>`, `api:<account>`, `channel:<platform>:<account>:<peer>` (a message
   * in a chat; `channelPeerPrincipal`), or '' (open mode).
   */
  principal: string;
  /** The owner (username) of the run's agent. */
  agentOwner: string;
  /** The owner of the definition executing now: the agent, or the chain a tool or `flow` entered. */
  owner: string;
  /** Admin-only powers are in effect (decided for `owner`, narrowed by every caller on the way). */
  admin: boolean;
  /**
   * When the definition executing now was last saved (ms since the epoch), when known: another
   * user's chain or agent created after it is not the one its author named (the id dangled, and
   * someone else filled it), so it is refused until the author saves again.
   */
  savedAt?: number;
  /**
   * Set when the definition's owner is an admin but its powers were narrowed on the way in: the
   * first owner without them whose definition called it (`enter`). Only the refusal's words use it.
   */
  narrowedBy?: string;
}

/** What an executing definition asks to build or use. */
export type Capability =
  /** Building a tool from an `ai/agent` node's `tools[]` entry, as resolved. */
  | { kind: 'tool'; type: string; name: string | undefined; config: Readonly<Record<string, unknown>> }
  /** An outbound request whose address policy the definition lifts (`restApiCall`, MCP). */
  | { kind: 'request'; via: string; allowPrivateNetworks: boolean; allowHosts: readonly string[] }
  /**
   * Running a chain or agent (rule-chain tool, `flow`, sub-agent): whether its owner shared it
   * with the caller's owner (`referenceSharing`), lends its powers, and holds credentials.
   */
  | { kind: 'reference'; target: 'chain' | 'agent'; id: string; owner: string; shared: boolean; lends: boolean; secrets: boolean; createdAt?: number }
  /**
   * Sending through a channel account on the agent's own initiative (the `send_message` tool):
   * `bindingRefusal` why no binding connects the agent to the account (`notBoundMessage`, null
   * when one does), `chatRefusal` why the account does not admit the chat (`deliverChatRefusal`, null when it
   * does), `pinned` that the tool's config lists the chat in `chatIds`.
   */
  | { kind: 'send'; bindingRefusal: string | null; chatRefusal: string | null; pinned: boolean };

/** The tools that run code on the worker: only an admin's definition may build them. */
const ADMIN_ONLY_BUILTINS = new Set(['bash']);

/**
 * The admin-only power a resolved tool entry holds, or undefined: `bash`, or a switch of its
 * config that lifts the outbound-address policy (`allowPrivateNetworks`, `allowHosts`) or opens
 * a sandboxed command's network (`allowNetwork`).
 */
export function toolPower(cap: Extract<Capability, { kind: 'tool' }>): string | undefined {
  const type = cap.type.trim().toLowerCase();
  if (type === 'builtin' && cap.name !== undefined && ADMIN_ONLY_BUILTINS.has(cap.name.trim().toLowerCase())) return cap.name.trim();
  return networkOpener(cap.config);
}

/** The first switch of a config that opens the network beyond the public-address policy. */
export function networkOpener(config: Readonly<Record<string, unknown>>): string | undefined {
  for (const key of ['allowPrivateNetworks', 'allowHosts', 'allowNetwork'] as const) {
    const v = config[key];
    if (v === true || (Array.isArray(v) && v.length > 0) || (typeof v === 'string' && v !== '' && v !== 'false')) return key;
  }
  return undefined;
}

/**
 * THE policy: why `authority` may not have `cap`, as a sentence for the person who wrote the
 * definition, or undefined when it may.
 */
export function refusal(authority: RunAuthority, cap: Capability): string | undefined {
  switch (cap.kind) {
    case 'tool': {
      const power = toolPower(cap);
      if (!power || authority.admin) return undefined;
      return powerRefusal(authority, power);
    }
    case 'request': {
      if (authority.admin || (!cap.allowPrivateNetworks && cap.allowHosts.length === 0)) return undefined;
      return `${cap.via}: ${powerRefusal(authority, cap.allowPrivateNetworks ? 'allowPrivateNetworks' : 'allowHosts')}`;
    }
    case 'reference': {
      // Its own definitions, and anything an admin's definition names (admins do everything).
      if (cap.owner === authority.owner || authority.admin) return undefined;
      const how = cap.target === 'agent' ? `PUT /api/v1/agents/${cap.id}/audience` : 'ruleChain.configuration.shared';
      if (!cap.shared) return `${cap.target} "${cap.id}" belongs to another user and is not shared with "${authority.owner}"; its owner may share it (${how})`;
      if (authority.savedAt !== undefined && cap.createdAt !== undefined && cap.createdAt > authority.savedAt) {
        return `${cap.target} "${cap.id}" was created by another user after this definition was saved, so it is not the one its author named; save the definition again to confirm it`;
      }
      // Its credentials would be sent wherever the caller's message points them.
      if (cap.secrets && !cap.lends) {
        return `${cap.target} "${cap.id}" holds its owner's credentials and does not lend them to other users' agents; its owner may lend them (ruleChain.configuration.lendPowers: true)`;
      }
      return undefined;
    }
    case 'send': {
      // Bindings are admin-only: an account reaches an agent only because an admin gave it to it,
      // whoever owns the agent (an admin owner adds the binding, PUT /api/v1/bindings).
      if (cap.bindingRefusal !== null) return cap.bindingRefusal;
      // The account's allow_from bounds the chats, as for a cron job's `deliver`; only an admin's
      // definition may reach past it, and only to chats it names in the tool's `chatIds`.
      if (cap.chatRefusal === null || (cap.pinned && authority.admin)) return undefined;
      return cap.chatRefusal;
    }
    default: {
      const never: never = cap;
      return `unknown capability ${JSON.stringify(never)}`;
    }
  }
}

/** What an admin-only power does, as the first half of its refusal. */
function powerEffect(power: string): string {
  if (ADMIN_ONLY_BUILTINS.has(power.toLowerCase())) return `the ${power} tool runs commands on the worker`;
  if (power === 'allowNetwork') return 'allowNetwork lets the commands of the bash tool reach the network';
  return `${power} lets tools and requests reach private and loopback addresses`;
}

/**
 * The one refusal of an admin-only power (`bash`, a network switch), whoever asks: the run, the
 * save-time check of the definition, the gateway's scan of a body. It says who owns the
 * definition, what the power does, and what would allow it: a definition of an admin's, or an
 * admin's chain that lends its powers.
 */
export function powerRefusal(authority: Pick<RunAuthority, 'owner' | 'narrowedBy'>, power: string): string {
  const head = `${powerEffect(power)}, so only an admin's definition may use it`;
  const lend = 'ruleChain.configuration.lendPowers: true';
  if (authority.narrowedBy !== undefined) {
    return `${head}; this definition belongs to the admin "${authority.owner}" but runs for a definition of "${authority.narrowedBy}", who is not an admin, and so has only their powers (its owner may lend its own: ${lend})`;
  }
  return `${head}; this definition belongs to "${authority.owner}", who is not an admin (an admin may give it to an agent of their own, or to a chain of their own that lends its powers: ${lend})`;
}

/**
 * How a chain's owner shares it (`ruleChain.configuration`): `shared: true` with every user's
 * definitions, `shared: ["alice", ...]` with those owners'; `lendPowers: true` lends its owner's
 * powers and credentials to whoever it is shared with. Absent: private to its owner.
 */
export function chainSharing(configuration: unknown, callerOwner: string): { shared: boolean; lends: boolean } {
  const c = (configuration !== null && typeof configuration === 'object' ? configuration : {}) as Record<string, unknown>;
  const shared = c.shared === true || (Array.isArray(c.shared) && c.shared.includes(callerOwner));
  return { shared, lends: c.lendPowers === true };
}

/** Throws the refusal as an error (the caller's error type), or does nothing when allowed. */
export function assertAllowed(authority: RunAuthority, cap: Capability, fail: (message: string) => Error = (m) => new Error(m)): void {
  const why = refusal(authority, cap);
  if (why !== undefined) throw fail(why);
}

/**
 * Whether `owner` holds admin powers: its user row says `admin`; an owner with no row holds
 * them only when it is `admin` itself (file imports and open-mode saves are recorded as `admin`,
 * which may have no row on a server without users).
 */
export async function ownerIsAdmin(db: Db, owner: string): Promise<boolean> {
  const user = await getUser(db, owner);
  if (user) return user.role === 'admin' && !user.disabled;
  return owner === 'admin';
}

/**
 * The authority inside a definition owned by `owner`, entered from `caller`: the caller's
 * powers, never more, unless the definition's admin owner lent its own (`lends`).
 */
export async function enter(db: Db, caller: RunAuthority, owner: string, lends = false, savedAt?: number): Promise<RunAuthority> {
  const saved = savedAt === undefined ? {} : { savedAt };
  if (owner === caller.owner && !lends) return { ...caller, ...saved };
  const ownerAdmin = await ownerIsAdmin(db, owner);
  const admin = lends ? ownerAdmin : caller.admin && ownerAdmin;
  const { narrowedBy: _before, ...rest } = caller;
  // An admin's definition without its powers has them from its caller: the refusal names who.
  const narrowed = !admin && ownerAdmin ? { narrowedBy: caller.narrowedBy ?? caller.owner } : {};
  return { ...rest, ...saved, owner, admin, ...narrowed };
}

/** A row's timestamp as ms, or undefined when it is not one (a cached row may carry it as text). */
export function timeOf(value: unknown): number | undefined {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** The role of a run's principal when it names an enabled user; undefined for api accounts and nobody. */
export async function principalRole(db: Db, principal: string): Promise<string | undefined> {
  if (!principal.startsWith('user:')) return undefined;
  const user = await getUser(db, principal.slice('user:'.length));
  return user && !user.disabled ? user.role : undefined;
}

/** The agent a run calls as a sub-agent, as stored: `secrets` says its row holds credentials. */
export interface SubagentTarget {
  id: string;
  owner: string;
  audience: unknown;
  dsl: unknown;
  secrets: boolean;
  createdAt?: unknown;
}

/**
 * Why the run may not call agent `target` as a sub-agent, or undefined. Calling an agent is
 * chatting with it, so who asked must be in its audience (`audienceAllows`); and as any
 * reference, another user's agent runs only when its audience includes the calling definition's
 * owner, with that owner's powers (its credentials only when it lends them).
 */
export async function subagentRefusal(db: Db, authority: RunAuthority, target: SubagentTarget): Promise<string | undefined> {
  if (!audienceAllows(target.audience, target.owner, authority.principal, await principalRole(db, authority.principal))) {
    const who = authority.principal === '' ? 'this conversation' : authority.principal;
    return `agent "${target.id}" is not shared with ${who}; its owner may share it (PUT /api/v1/agents/${target.id}/audience)`;
  }
  const ownerRole = (await ownerIsAdmin(db, authority.owner)) ? 'admin' : 'user';
  const shared = audienceAllows(target.audience, target.owner, `user:${authority.owner}`, ownerRole);
  const configuration = (target.dsl as { ruleChain?: { configuration?: unknown } } | null)?.ruleChain?.configuration;
  const { lends } = chainSharing(configuration, authority.owner);
  const createdAt = timeOf(target.createdAt);
  return refusal(authority, { kind: 'reference', target: 'agent', id: target.id, owner: target.owner, shared, lends, secrets: target.secrets, ...(createdAt === undefined ? {} : { createdAt }) });
}
