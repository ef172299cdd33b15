import { sql, type Insertable } from 'kysely';
import type { Db } from '../handle.js';
import { precompiled } from '../precompiled.js';
import type { RunUsageTable, UsageKind } from '../tables.js';

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

const USAGE_COLUMNS = ['run_id', 'agent_id', 'principal', 'provider', 'model', 'prompt_tokens', 'completion_tokens', 'kind'] as const;

/** The INSERT of `n` rows, built and compiled once per `n`; its arguments row after row, in USAGE_COLUMNS order. */
function insertUsageStatement(n: number) {
  return precompiled<unknown[], never>((qb, a) =>
    qb
      .insertInto('run_usage')
      .values(Array.from({ length: n }, (_, i) => Object.fromEntries(USAGE_COLUMNS.map((col, j) => [col, a(i * USAGE_COLUMNS.length + j)])) as unknown as Insertable<RunUsageTable>)),
  );
}

/** Larger batches are compiled on each call (rare: a batch is the model calls of 25 ms). */
const MAX_PRECOMPILED_USAGE_ROWS = 32;
const insertUsage: Array<ReturnType<typeof insertUsageStatement> | undefined> = [];

/** Several model calls' usage in one INSERT (all or none). */
export async function insertRunUsages(db: Db, rows: readonly RunUsageInput[]): Promise<void> {
  if (rows.length === 0) return;
  const n = rows.length;
  const statement = n <= MAX_PRECOMPILED_USAGE_ROWS ? (insertUsage[n] ??= insertUsageStatement(n)) : insertUsageStatement(n);
  const args: unknown[] = [];
  for (const usage of rows) {
    args.push(
      usage.runId,
      usage.agentId,
      usage.principal,
      usage.provider,
      usage.model,
      // A provider's count is read off its wire: a missing or negative one counts as none.
      Math.max(0, Math.round(usage.promptTokens) || 0),
      Math.max(0, Math.round(usage.completionTokens) || 0),
      usage.kind ?? 'chat',
    );
  }
  await statement(db, args);
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
