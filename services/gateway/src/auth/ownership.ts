import { Errors } from '@agentry/errors';
import { getCronJob, getRuleChain, type Db } from '@agentry/db';
import type { Principal } from './credentials.js';

/**
 * The ownership model. Agents, rule chains and cron jobs record the username that created them
 * (file imports belong to `admin`); an agent's skills, workspace and agent-level rules are
 * part of the agent and follow its owner. Every user may read agents and chains (secrets
 * redacted) and chat with them; only the owner or an admin may change them. Sessions belong to
 * the principal that opened them (see sessionOwner).
 */

/** What an `owner` route's path names: `agent` (`:agentId`), `chain` (`:id`, agents included), `cron` (`:id`). */
export type Owned = 'agent' | 'chain' | 'cron';

/** Username recorded as the owner of file imports, and of everything made in open mode. */
export const DEFAULT_OWNER = 'admin';

export function isAdmin(p: Principal): boolean {
  return p.kind === 'open' || (p.kind === 'user' && p.role === 'admin');
}

/** The username a new agent, chain or cron job made by `p` belongs to. */
export function ownerName(p: Principal): string {
  return p.kind === 'user' ? p.username : DEFAULT_OWNER;
}

/**
 * Whose conversation a chat opens: `user:<name>` (JWT or the user's API key alike),
 * `api:<account>`, or '' where nobody is named (open mode, channel messages, cron). It is part
 * of the session's name, so the same `sessionId` from two principals is two sessions.
 */
export function sessionOwner(p: Principal): string {
  switch (p.kind) {
    case 'user':
      return `user:${p.username}`;
    case 'account':
      return `api:${p.accountId}`;
    case 'open':
    case 'anonymous':
      return '';
    default: {
      const never: never = p;
      return String(never);
    }
  }
}

/** Sessions a principal may see and clear: undefined means all of them (admins, open mode). */
export function visibleSessionOwner(p: Principal): string | undefined {
  return isAdmin(p) ? undefined : sessionOwner(p);
}

/** May `p` change a row owned by `owner`? */
export function mayChange(p: Principal, owner: string): boolean {
  return isAdmin(p) || (p.kind === 'user' && p.username === owner);
}

const NOUN: Record<Owned, string> = { agent: 'agent', chain: 'rule chain', cron: 'cron job' };

async function ownerOf(db: Db, owns: Owned, params: Record<string, unknown>): Promise<string | undefined> {
  switch (owns) {
    case 'agent': {
      const id = params['agentId'];
      const row = typeof id === 'string' ? await getRuleChain(db, id) : undefined;
      return row?.kind === 'agent' ? row.owner : undefined;
    }
    case 'chain': {
      const id = params['id'];
      return typeof id === 'string' ? (await getRuleChain(db, id))?.owner : undefined;
    }
    case 'cron': {
      const id = params['id'];
      return typeof id === 'string' ? (await getCronJob(db, id))?.owner : undefined;
    }
    default: {
      const never: never = owns;
      throw new Errors.INTERNAL(`unknown owned kind ${String(never)}`);
    }
  }
}

/**
 * 403 unless `p` owns the row the path names or is an admin. A row that does not exist passes:
 * the handler answers its 404 (which names nothing the caller did not send).
 */
export async function assertOwner(db: Db, p: Principal, owns: Owned | undefined, params: unknown): Promise<void> {
  if (isAdmin(p)) return;
  if (owns === undefined) throw new Errors.FORBIDDEN('this route does not say what it owns');
  const record = (params ?? {}) as Record<string, unknown>;
  const owner = await ownerOf(db, owns, record);
  if (owner === undefined || mayChange(p, owner)) return;
  const id = String(owns === 'agent' ? record['agentId'] : record['id']);
  throw new Errors.FORBIDDEN(`${NOUN[owns]} "${id}" belongs to another user; only its owner or an admin may do this`);
}
