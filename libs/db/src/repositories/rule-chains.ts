import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { JsonValue } from '../tables.js';

export type RuleChainKind = 'agent' | 'rule';

export interface RuleChainRow {
  id: string;
  kind: RuleChainKind;
  /** The owning agent of an agent-level rule; null for agents and global rules. */
  agentId: string | null;
  name: string;
  category: string | null;
  dsl: JsonValue;
  /** Username of the creator (`admin` for file imports). */
  owner: string;
  /** Who may chat with an agent besides its owner and admins: read it with `audienceOf` (@agentry/contracts). */
  audience: JsonValue;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewRuleChain {
  id: string;
  kind: RuleChainKind;
  agentId: string | null;
  name: string;
  category: string | null;
  dsl: JsonValue;
  /** Default `admin`. */
  owner?: string;
  /** Default: everyone (the column's default). */
  audience?: JsonValue;
}

export interface RuleChainFilter {
  kind?: RuleChainKind;
  /** Agent-level rules of this agent. */
  agentId?: string;
  category?: string;
  /** Rows this username owns (quotas count a user's agents). */
  owner?: string;
}

const COLUMNS = ['id', 'kind', 'agent_id', 'name', 'category', 'dsl', 'owner', 'audience', 'created_at', 'updated_at'] as const;

type Row = {
  id: string;
  kind: RuleChainKind;
  agent_id: string | null;
  name: string;
  category: string | null;
  dsl: JsonValue;
  owner: string;
  audience: JsonValue;
  created_at: Date;
  updated_at: Date;
};

function toRuleChain(row: Row): RuleChainRow {
  return {
    id: row.id,
    kind: row.kind,
    agentId: row.agent_id,
    name: row.name,
    category: row.category,
    dsl: row.dsl,
    owner: row.owner,
    audience: row.audience,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function filtered(db: Db, filter: RuleChainFilter) {
  let query = db.selectFrom('rule_chains');
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.agentId !== undefined) query = query.where('agent_id', '=', filter.agentId);
  if (filter.category !== undefined) query = query.where('category', '=', filter.category);
  if (filter.owner !== undefined) query = query.where('owner', '=', filter.owner);
  return query;
}

/** Inserts a chain. A duplicate id raises the driver's unique violation (see isUniqueViolation). */
export async function insertRuleChain(db: Db, chain: NewRuleChain): Promise<RuleChainRow> {
  const row = await db
    .insertInto('rule_chains')
    .values({
      id: chain.id,
      kind: chain.kind,
      agent_id: chain.agentId,
      name: chain.name,
      category: chain.category,
      dsl: JSON.stringify(chain.dsl),
      ...(chain.owner !== undefined ? { owner: chain.owner } : {}),
      ...(chain.audience !== undefined ? { audience: JSON.stringify(chain.audience) } : {}),
    })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
  return toRuleChain(row);
}

export async function getRuleChain(db: Db, id: string): Promise<RuleChainRow | undefined> {
  const row = await db.selectFrom('rule_chains').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  return row && toRuleChain(row);
}

/** Chains matching the filter, by id (bytewise, as on both engines). */
export async function listRuleChains(
  db: Db,
  filter: RuleChainFilter = {},
  page?: { limit: number; offset: number },
): Promise<RuleChainRow[]> {
  let query = filtered(db, filter).select(COLUMNS).orderBy(sql`id collate "C"`);
  if (page) query = query.limit(page.limit).offset(page.offset);
  return (await query.execute()).map(toRuleChain);
}

export async function countRuleChains(db: Db, filter: RuleChainFilter = {}): Promise<number> {
  const { n } = await filtered(db, filter)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(n);
}

/** Ids of the agent-level rules of an agent. */
export async function listRuleChainIdsOfAgent(db: Db, agentId: string): Promise<string[]> {
  const rows = await db.selectFrom('rule_chains').select('id').where('agent_id', '=', agentId).execute();
  return rows.map((r) => r.id);
}

/** Replaces name, category and DSL; undefined when the chain does not exist. */
export async function updateRuleChain(
  db: Db,
  id: string,
  change: { name: string; category: string | null; dsl: JsonValue },
): Promise<RuleChainRow | undefined> {
  const row = await db
    .updateTable('rule_chains')
    .set({ name: change.name, category: change.category, dsl: JSON.stringify(change.dsl), updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toRuleChain(row);
}

/** Replaces an agent's audience; the row, or undefined when there is no such agent. */
export async function setAgentAudience(db: Db, id: string, audience: JsonValue): Promise<RuleChainRow | undefined> {
  const row = await db
    .updateTable('rule_chains')
    .set({ audience: JSON.stringify(audience), updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('kind', '=', 'agent')
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toRuleChain(row);
}

/**
 * Chains and agents whose DSL text contains one of `ids` as a JSON string (`"x"`), except those
 * rows themselves: the candidates that may name them, which the caller confirms on the parsed
 * DSL (a node id or a name may spell the same string).
 */
export async function listRuleChainsMentioning(db: Db, ids: readonly string[]): Promise<RuleChainRow[]> {
  if (ids.length === 0) return [];
  const needles = ids.map((id) => JSON.stringify(id));
  const rows = await db
    .selectFrom('rule_chains')
    .select(COLUMNS)
    .where('id', 'not in', [...ids])
    .where(sql<boolean>`(${sql.join(needles.map((n) => sql`strpos(dsl::text, ${n}) > 0`), sql` or `)})`)
    .orderBy(sql`id collate "C"`)
    .execute();
  return rows.map(toRuleChain);
}

/**
 * Deletes a chain; for an agent, everything it owns goes with it (ON DELETE CASCADE: its rules,
 * skills, workspace and, as later tables add their keys, cron jobs and sessions).
 */
export async function deleteRuleChain(db: Db, id: string): Promise<boolean> {
  const result = await db.deleteFrom('rule_chains').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Replaces only the DSL, and only while the row still has `updatedAt` (a background rewrite
 * such as the gateway's sealing pass must not overwrite a user's update made meanwhile).
 * False when the row changed or is gone.
 */
export async function replaceRuleChainDslIfUnchanged(db: Db, id: string, updatedAt: Date, dsl: JsonValue): Promise<boolean> {
  const result = await db
    .updateTable('rule_chains')
    .set({ dsl: JSON.stringify(dsl), updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    // The column keeps microseconds, a Date only milliseconds.
    .where(sql<Date>`date_trunc('milliseconds', updated_at)`, '=', updatedAt)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
