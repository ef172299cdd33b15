import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { UsageKind } from '../tables.js';

/** One model call's usage, as the worker records it. */
export interface RunUsageInput {
  runId: string;
  agentId: string;
  /** The run's principal (`user:<name>`, `api:<account>`, ''). */
  principal: string;
  provider: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** What the call was for; default `chat`. */
  kind?: UsageKind;
}

export async function insertRunUsage(db: Db, usage: RunUsageInput): Promise<void> {
  await insertRunUsages(db, [usage]);
}

/** Several model calls' usage in one INSERT (all or none). */
export async function insertRunUsages(db: Db, rows: readonly RunUsageInput[]): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('run_usage')
    .values(
      rows.map((usage) => ({
        run_id: usage.runId,
        agent_id: usage.agentId,
        principal: usage.principal,
        provider: usage.provider,
        model: usage.model,
        // A provider's count is read off its wire: a missing or negative one counts as none.
        prompt_tokens: Math.max(0, Math.round(usage.promptTokens) || 0),
        completion_tokens: Math.max(0, Math.round(usage.completionTokens) || 0),
        kind: usage.kind ?? 'chat',
      })),
    )
    .execute();
}

export const USAGE_GROUPS = ['agent', 'principal', 'provider', 'day', 'kind'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export interface UsageTotal {
  key: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Model calls counted. */
  requests: number;
}

export interface UsageQuery {
  groupBy: UsageGroup;
  /** Inclusive start. */
  from: Date;
  /** Exclusive end. */
  to: Date;
  /** Only this principal's usage. */
  principal?: string;
}

/** The SQL of a group's key; a day is the UTC date (`YYYY-MM-DD`). */
function keyOf(groupBy: UsageGroup) {
  switch (groupBy) {
    case 'agent':
      return sql<string>`agent_id`;
    case 'principal':
      return sql<string>`principal`;
    case 'provider':
      return sql<string>`provider`;
    case 'kind':
      return sql<string>`kind`;
    case 'day':
      return sql<string>`to_char(created_at at time zone 'UTC', 'YYYY-MM-DD')`;
  }
}

/** Totals per group over [from, to), ordered by key (days in time order). */
export async function usageTotals(db: Db, q: UsageQuery): Promise<UsageTotal[]> {
  const key = keyOf(q.groupBy);
  let query = db
    .selectFrom('run_usage')
    .select([
      key.as('key'),
      sql<string>`coalesce(sum(prompt_tokens), 0)`.as('prompt'),
      sql<string>`coalesce(sum(completion_tokens), 0)`.as('completion'),
      sql<string>`count(*)`.as('requests'),
    ])
    .where('created_at', '>=', q.from)
    .where('created_at', '<', q.to);
  if (q.principal !== undefined) query = query.where('principal', '=', q.principal);
  const rows = await query.groupBy(key).orderBy(key).execute();
  return rows.map((r) => {
    const promptTokens = Number(r.prompt);
    const completionTokens = Number(r.completion);
    return { key: r.key, promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, requests: Number(r.requests) };
  });
}

/**
 * The `tokensPerDay` limit of a principal as stored (a user's `budget` column, an api account's
 * `settings.budget`), or undefined when it has none (0 or absent is no limit; `''` and any other
 * principal never has one). Only the number is read: nothing secret leaves the rows.
 */
export async function tokensPerDayOf(db: Db, principal: string): Promise<number | undefined> {
  const colon = principal.indexOf(':');
  const kind = principal.slice(0, colon);
  const id = principal.slice(colon + 1);
  if (colon < 0 || id === '') return undefined;
  let budget: unknown;
  if (kind === 'user') {
    budget = (await db.selectFrom('users').select('budget').where('username', '=', id).executeTakeFirst())?.budget;
  } else if (kind === 'api') {
    const row = await db.selectFrom('channel_accounts').select('settings').where('platform', '=', 'api').where('id', '=', id).executeTakeFirst();
    budget = (row?.settings as { budget?: unknown } | null | undefined)?.budget;
  } else return undefined;
  const limit = (budget as { tokensPerDay?: unknown } | null | undefined)?.tokensPerDay;
  return typeof limit === 'number' && limit > 0 ? Math.floor(limit) : undefined;
}
