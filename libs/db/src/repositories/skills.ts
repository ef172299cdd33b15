import { sql, type ExpressionBuilder } from 'kysely';
import type { Db } from '../handle.js';
import type { Database } from '../tables.js';

export type SkillScope = 'global' | 'local';
export type SkillStatus = 'active' | 'draft';

export interface SkillRow {
  scope: SkillScope;
  /** The owning agent of a local skill; null for a global one. */
  agentId: string | null;
  name: string;
  description: string;
  content: string;
  status: SkillStatus;
  createdAt: Date;
  updatedAt: Date;
}

/** Which skill: a global one by name, or an agent's local one. */
export type SkillKey = { scope: 'global'; name: string } | { scope: 'local'; agentId: string; name: string };

export interface SkillFilter {
  /** all (default): global and local; local skills only of `agentId` when it is given. */
  scope?: 'all' | SkillScope;
  agentId?: string;
  /**
   * Local skills only of agents this username owns (global skills are not limited). Unset: every
   * agent's. A plain user's view of the list: another user's agent-local skills are theirs alone.
   */
  localOwner?: string;
}

const COLUMNS = ['scope', 'agent_id', 'name', 'description', 'content', 'status', 'created_at', 'updated_at'] as const;

function toSkill(row: {
  scope: SkillScope;
  agent_id: string | null;
  name: string;
  description: string;
  content: string;
  status: SkillStatus;
  created_at: Date;
  updated_at: Date;
}): SkillRow {
  return {
    scope: row.scope,
    agentId: row.agent_id,
    name: row.name,
    description: row.description,
    content: row.content,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function matches(eb: ExpressionBuilder<Database, 'skills'>, key: SkillKey) {
  return eb.and([
    eb('scope', '=', key.scope),
    eb('name', '=', key.name),
    key.scope === 'global' ? eb('agent_id', 'is', null) : eb('agent_id', '=', key.agentId),
  ]);
}

function filtered(db: Db, filter: SkillFilter) {
  let query = db.selectFrom('skills');
  const scope = filter.scope ?? 'all';
  if (scope === 'global') query = query.where('scope', '=', 'global');
  else if (scope === 'local') {
    query = query.where('scope', '=', 'local');
    if (filter.agentId !== undefined) query = query.where('agent_id', '=', filter.agentId);
  } else if (filter.agentId !== undefined) {
    const agentId = filter.agentId;
    query = query.where((eb) => eb.or([eb('scope', '=', 'global'), eb('agent_id', '=', agentId)]));
  }
  if (filter.localOwner !== undefined) {
    const owner = filter.localOwner;
    query = query.where((eb) =>
      eb.or([
        eb('scope', '=', 'global'),
        eb('agent_id', 'in', eb.selectFrom('rule_chains').select('rule_chains.id').where('rule_chains.kind', '=', 'agent').where('rule_chains.owner', '=', owner)),
      ]),
    );
  }
  return query;
}

export async function getSkill(db: Db, key: SkillKey): Promise<SkillRow | undefined> {
  const row = await db.selectFrom('skills').select(COLUMNS).where((eb) => matches(eb, key)).executeTakeFirst();
  return row && toSkill(row);
}

/** Skills by name, then global before local, then agent (bytewise on both engines). */
export async function listSkills(db: Db, filter: SkillFilter, page?: { limit: number; offset: number }): Promise<SkillRow[]> {
  let query = filtered(db, filter)
    .select(COLUMNS)
    .orderBy(sql`name collate "C"`)
    .orderBy('scope')
    .orderBy(sql`agent_id collate "C"`);
  if (page) query = query.limit(page.limit).offset(page.offset);
  return (await query.execute()).map(toSkill);
}

export async function countSkills(db: Db, filter: SkillFilter): Promise<number> {
  const { n } = await filtered(db, filter)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(n);
}

export interface SkillValues {
  description: string;
  content: string;
  status: SkillStatus;
}

/** Inserts a skill. A duplicate raises the driver's unique violation (see isUniqueViolation). */
export async function insertSkill(db: Db, key: SkillKey, values: SkillValues): Promise<SkillRow> {
  const row = await db
    .insertInto('skills')
    .values({ scope: key.scope, agent_id: key.scope === 'local' ? key.agentId : null, name: key.name, ...values })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
  return toSkill(row);
}

/** Changes the given fields; undefined when the skill does not exist. */
export async function updateSkill(db: Db, key: SkillKey, change: Partial<SkillValues>): Promise<SkillRow | undefined> {
  const row = await db
    .updateTable('skills')
    .set({ ...change, updated_at: sql<Date>`now()` })
    .where((eb) => matches(eb, key))
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toSkill(row);
}

export async function deleteSkill(db: Db, key: SkillKey): Promise<boolean> {
  const result = await db.deleteFrom('skills').where((eb) => matches(eb, key)).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
