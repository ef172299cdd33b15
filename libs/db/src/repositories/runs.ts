import { randomUUID } from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import type { Db } from '../handle.js';
import { precompiled } from '../precompiled.js';
import { SESSION_COLUMNS, toSession, type SessionRecord } from './sessions.js';
import { ACTIVE_RUN_STATUSES, type FinalRunStatus, type JsonValue, type RunSource, type RunStatus, type RunsTable } from '../tables.js';

export interface RunRecord {
  id: string;
  seq: number;
  agentId: string;
  sessionId: string | null;
  source: RunSource;
  status: RunStatus;
  request: JsonValue;
  output: string | null;
  error: string | null;
  usage: JsonValue | null;
  streamed: boolean;
  attempts: number;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  /** The waiting gateway process's reply channel id; null: events go on `run:<id>`. */
  replyTo: string | null;
  /** Who asked (`user:<name>`, `api:<account>`, ''). */
  principal: string;
}

const COLUMNS = [
  'id',
  'seq',
  'agent_id',
  'session_id',
  'source',
  'status',
  'request',
  'output',
  'error',
  'usage',
  'streamed',
  'attempts',
  'created_at',
  'started_at',
  'finished_at',
  'reply_to',
  'principal',
] as const;

// Run records leave the steps out (large, read only by the steps route: getRunSteps).
type Row = Omit<Selectable<RunsTable>, 'steps'>;

function toRecord(r: Row): RunRecord {
  return {
    id: r.id,
    seq: Number(r.seq),
    agentId: r.agent_id,
    sessionId: r.session_id,
    source: r.source,
    status: r.status,
    request: r.request,
    output: r.output,
    error: r.error,
    usage: r.usage,
    streamed: r.streamed,
    attempts: r.attempts,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    replyTo: r.reply_to,
    principal: r.principal,
  };
}

/**
 * How a new run row is committed. `durable` (the default): a synchronous commit, the row is on
 * disk when the call returns. `deferred`: an asynchronous commit (`synchronous_commit = off` for
 * this one statement's transaction), which does not wait for its WAL flush. The row becomes
 * durable when the WAL writer flushes it (`wal_writer_delay`, 200 ms; three of them at worst) or
 * as soon as any later synchronous commit on the server flushes past it: the worker's claim of
 * the same run is one, and it commits before the run publishes anything. So a Postgres (or
 * machine) crash loses only runs that no worker had claimed yet: their clients saw no token, and
 * get an error (the relay finds no row); their jobs find no row and end (`does not exist`).
 */
export type RunCommit = 'durable' | 'deferred';

/**
 * Turns synchronous commit off for the statement's own transaction (`set_config(..., true)`:
 * local to it, read at its commit): one round trip, where `SET LOCAL` would need BEGIN and COMMIT
 * around it. Referenced by the statement so that Postgres evaluates it.
 */
const DEFERRED_COMMIT = sql`select set_config('synchronous_commit', 'off', true) as deferred`;

interface NewRunArgs {
  id: string;
  agentId: string;
  sessionId: string | null;
  source: RunSource;
  /** The request as JSON text. */
  request: string;
  replyTo: string | null;
  principal: string;
}

// Built and compiled once (precompiled.ts), one statement per commit mode.
const INSERT_RUN = {
  durable: precompiled<NewRunArgs, Row>((qb, a) =>
    qb
      .insertInto('runs')
      .values({ id: a('id'), agent_id: a('agentId'), session_id: a('sessionId'), source: a('source'), request: a('request'), reply_to: a('replyTo'), principal: a('principal') })
      .returning(COLUMNS),
  ),
  // Inserted as claimed by its first attempt (see insertRun's `claimed`); committed durably.
  claimed: precompiled<NewRunArgs, Row>((qb, a) =>
    qb
      .insertInto('runs')
      .values({
        id: a('id'),
        agent_id: a('agentId'),
        session_id: a('sessionId'),
        source: a('source'),
        request: a('request'),
        reply_to: a('replyTo'),
        principal: a('principal'),
        status: 'running',
        attempts: 1,
        started_at: sql<Date>`now()`,
      })
      .returning(COLUMNS),
  ),
  deferred: precompiled<NewRunArgs, Row>(
    (_qb, a) => sql<Row>`
      with c as (${DEFERRED_COMMIT})
      insert into runs (id, agent_id, session_id, source, request, reply_to, principal)
      select ${a('id')}, ${a('agentId')}, ${a('sessionId')}::text, ${a('source')}, ${a('request')}::jsonb, ${a('replyTo')}::text, ${a('principal')} from c
      returning ${sql.join(COLUMNS.map((col) => sql.ref(col)))}
    `,
  ),
};

/**
 * A new run. `claimed`: the row is written as `claimRun` would leave it (running, attempt 1,
 * started now), for a caller whose own process runs it at once (an in-process queue: the claim
 * is then one statement fewer); always a durable commit. Not for a session's run, whose turn is
 * claimed when the earlier turns have ended.
 */
export async function insertRun(
  db: Db,
  run: { id: string; agentId: string; sessionId: string | null; source: RunSource; request: JsonValue; replyTo?: string | null; principal?: string },
  opts: { commit?: RunCommit; claimed?: boolean } = {},
): Promise<RunRecord> {
  if (opts.claimed && run.sessionId !== null) throw new Error('insertRun: a run of a session is claimed at its turn, not at its insert');
  const { rows } = await INSERT_RUN[opts.claimed ? 'claimed' : (opts.commit ?? 'durable')](db, {
    id: run.id,
    agentId: run.agentId,
    sessionId: run.sessionId,
    source: run.source,
    request: JSON.stringify(run.request),
    replyTo: run.replyTo ?? null,
    principal: run.principal ?? '',
  });
  const row = rows[0];
  if (!row) throw new Error('insertRun: the statement returned no row');
  return toRecord(row);
}

interface NewRunInSessionArgs {
  sessionId: string;
  agentId: string;
  sessionKey: string;
  channel: string;
  scope: string;
  owner: string;
  runId: string;
  source: RunSource;
  /** The request as JSON text. */
  request: string;
  replyTo: string | null;
  principal: string;
}

type RunInSessionRow = Row & { [K in (typeof SESSION_COLUMNS)[number] as `s_${K}`]: Parameters<typeof toSession>[0][K] };

function insertRunInSessionStatement(deferred: boolean) {
  return precompiled<NewRunInSessionArgs, RunInSessionRow>((_qb, a) => {
    const runCols = sql.join(COLUMNS.map((c) => sql.ref(`r.${c}`)));
    // The session's columns come back prefixed: both tables have id, agent_id and the timestamps.
    const sessionCols = sql.join(SESSION_COLUMNS.map((c) => sql`${sql.ref(`s.${c}`)} as ${sql.ref(`s_${c}`)}`));
    // A new session's row is committed as its run's is (RunCommit), in the same transaction.
    return sql<RunInSessionRow>`
    with ${deferred ? sql`c as (${DEFERRED_COMMIT}), ` : sql``}s as (
      insert into sessions (id, agent_id, session_key, channel, scope, owner)
      values (${a('sessionId')}, ${a('agentId')}, ${a('sessionKey')}, ${a('channel')}, ${a('scope')}, ${a('owner')})
      on conflict (agent_id, channel, owner, session_key) do update set updated_at = sessions.updated_at
      returning ${sql.join(SESSION_COLUMNS.map((c) => sql.ref(c)))}
    ), r as (
      insert into runs (id, agent_id, session_id, source, request, reply_to, principal)
      select ${a('runId')}, ${a('agentId')}, s.id, ${a('source')}, ${a('request')}::jsonb, ${a('replyTo')}::text, ${a('principal')} from s${deferred ? sql`, c` : sql``}
      returning ${sql.join(COLUMNS.map((c) => sql.ref(c)))}
    )
    select ${runCols}, ${sessionCols} from r, s
  `;
  });
}

const INSERT_RUN_IN_SESSION = { durable: insertRunInSessionStatement(false), deferred: insertRunInSessionStatement(true) };

/**
 * `ensureSession` and `insertRun` in one statement (one round trip instead of two): the session of
 * (agent, channel, owner, key), created on first use, and a new run in it.
 */
export async function insertRunInSession(
  db: Db,
  session: { agentId: string; sessionKey: string; channel?: string; scope?: string; owner?: string },
  run: { id: string; source: RunSource; request: JsonValue; replyTo?: string | null; principal?: string },
  opts: { commit?: RunCommit } = {},
): Promise<{ run: RunRecord; session: SessionRecord }> {
  const { rows } = await INSERT_RUN_IN_SESSION[opts.commit ?? 'durable'](db, {
    sessionId: randomUUID(),
    agentId: session.agentId,
    sessionKey: session.sessionKey,
    channel: session.channel ?? 'api',
    scope: session.scope ?? '',
    owner: session.owner ?? '',
    runId: run.id,
    source: run.source,
    request: JSON.stringify(run.request),
    replyTo: run.replyTo ?? null,
    principal: run.principal ?? '',
  });
  const row = rows[0];
  if (!row) throw new Error('insertRunInSession: the statement returned no row');
  return {
    run: toRecord(row),
    session: toSession({
      id: row.s_id,
      agent_id: row.s_agent_id,
      session_key: row.s_session_key,
      channel: row.s_channel,
      scope: row.s_scope,
      owner: row.s_owner,
      title: row.s_title,
      message_count: row.s_message_count,
      created_at: row.s_created_at,
      updated_at: row.s_updated_at,
    }),
  };
}

export async function getRun(db: Db, id: string): Promise<RunRecord | undefined> {
  const row = await db.selectFrom('runs').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  return row && toRecord(row);
}

/**
 * Deletes one run row (a Responses API `DELETE /responses/{id}`): its session and the messages
 * its turn added stay, as later turns of the conversation build on them.
 */
export async function deleteRun(db: Db, id: string): Promise<boolean> {
  const res = await db.deleteFrom('runs').where('id', '=', id).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** How a run stands or ended, without its request (a relay reads this while its events are silent). */
export type RunOutcome = Pick<RunRecord, 'status' | 'output' | 'error' | 'usage' | 'finishedAt'>;

export async function getRunOutcome(db: Db, id: string): Promise<RunOutcome | undefined> {
  const row = await db.selectFrom('runs').select(['status', 'output', 'error', 'usage', 'finished_at']).where('id', '=', id).executeTakeFirst();
  return row && { status: row.status, output: row.output, error: row.error, usage: row.usage, finishedAt: row.finished_at };
}

/**
 * Marks the run running and counts the attempt. A run already running is claimed again: that is
 * a retry after its worker died. Finished or cancelled runs are not claimed (undefined).
 */
const CLAIM_RUN = precompiled<{ id: string }, Row>((qb, a) =>
  qb
    .updateTable('runs')
    .set({ status: 'running', attempts: sql<number>`attempts + 1`, started_at: sql<Date>`coalesce(started_at, now())` })
    .where('id', '=', a('id'))
    .where('status', 'in', ACTIVE_RUN_STATUSES)
    .returning(COLUMNS),
);

export async function claimRun(db: Db, id: string): Promise<RunRecord | undefined> {
  const row = (await CLAIM_RUN(db, { id })).rows[0];
  return row && toRecord(row);
}

/**
 * The worker's first step in one round trip: a run outside a session (nothing to wait for) is
 * claimed as `claimRun` would; a run of a session, or one that has ended, is only read
 * (`claimed: false`; claim it with `claimRun` once its turn has come). Undefined: no such run.
 */
const CLAIM_RUN_OUTSIDE_SESSION = precompiled<{ id: string }, Row & { claimed: boolean }>((_qb, a) => {
  const cols = sql.join(COLUMNS.map((c) => sql.ref(c)));
  // Literals, not parameters: the SQL text stays exactly what it was before the list was shared.
  const active = sql.join(ACTIVE_RUN_STATUSES.map((s) => sql.lit(s)));
  return sql<Row & { claimed: boolean }>`
    with claimed as (
      update runs set status = 'running', attempts = attempts + 1, started_at = coalesce(started_at, now())
      where id = ${a('id')} and status in (${active}) and session_id is null
      returning ${cols}
    )
    select ${cols}, true as claimed from claimed
    union all
    select ${cols}, false as claimed from runs where id = ${a('id')} and not exists (select 1 from claimed)
  `;
});

export async function claimRunOutsideSession(db: Db, id: string): Promise<{ run: RunRecord; claimed: boolean } | undefined> {
  const row = (await CLAIM_RUN_OUTSIDE_SESSION(db, { id })).rows[0];
  return row && { run: toRecord(row), claimed: row.claimed === true };
}

/** Recorded at the first token: a run that streamed is never retried (the client saw output). */
export async function markRunStreamed(db: Db, id: string): Promise<void> {
  await MARK_RUN_STREAMED(db, { id });
}

const MARK_RUN_STREAMED = precompiled<{ id: string }, never>((qb, a) => qb.updateTable('runs').set({ streamed: true }).where('id', '=', a('id')).where('streamed', '=', false));

interface FinishArgs {
  id: string;
  status: FinalRunStatus;
  output: string | null;
  error: string | null;
  /** JSON text. */
  usage: string | null;
  finishedAt: Date;
  /** JSON text. */
  steps: string;
}

/**
 * One statement per shape (the caller's time or now(), the streamed mark, the steps), each
 * compiled on its first use: index `finishedAt | streamed << 1 | steps << 2`.
 */
const FINISH_RUN = Array.from({ length: 8 }, (_, shape) =>
  precompiled<FinishArgs, never>((qb, a) =>
    qb
      .updateTable('runs')
      .set({
        status: a('status'),
        output: a('output'),
        error: a('error'),
        usage: a('usage'),
        // The caller's time when it tells the time in an event too (the done event's finishedAt).
        finished_at: shape & 1 ? a('finishedAt') : sql<Date>`now()`,
        // The mark of a run that ended before its worker wrote it (folded into this one write).
        ...(shape & 2 ? { streamed: true } : {}),
        // A chain's trace goes with the finish, so a final run never lacks the steps it had.
        ...(shape & 4 ? { steps: a('steps') } : {}),
      })
      .where('id', '=', a('id'))
      .where('status', 'in', ACTIVE_RUN_STATUSES),
  ),
);

/** Sets the final state unless the run already ended (a cancel that raced a finish keeps the first). */
export async function finishRun(
  db: Db,
  id: string,
  outcome: { status: FinalRunStatus; output?: string | null; error?: string | null; usage?: JsonValue | null; streamed?: boolean; steps?: JsonValue[]; finishedAt?: Date },
): Promise<boolean> {
  const shape = (outcome.finishedAt ? 1 : 0) | (outcome.streamed ? 2 : 0) | (outcome.steps ? 4 : 0);
  const result = await FINISH_RUN[shape]!(db, {
    id,
    status: outcome.status,
    output: outcome.output ?? null,
    error: outcome.error ?? null,
    usage: outcome.usage === undefined || outcome.usage === null ? null : JSON.stringify(outcome.usage),
    finishedAt: outcome.finishedAt as Date,
    steps: JSON.stringify(outcome.steps),
  });
  return Number(result.numAffectedRows ?? 0) > 0;
}

/**
 * The steps of a run whose chain went on after it was finished (the nodes after the answering
 * `ai/agent` node): the whole trace once the chain has ended. Only on a final run.
 */
export async function recordRunSteps(db: Db, id: string, steps: JsonValue[]): Promise<void> {
  await db.updateTable('runs').set({ steps: JSON.stringify(steps) }).where('id', '=', id).where('status', 'not in', ACTIVE_RUN_STATUSES).execute();
}

/**
 * A run as the agent's run list shows it: no output or steps (only whether it has some); of the
 * request, only the start of what it answered (`asked`) and who asked, for the route to decide
 * whether the caller may read it.
 */
export interface RunSummary {
  id: string;
  status: RunStatus;
  source: RunSource;
  createdAt: Date;
  finishedAt: Date | null;
  error: string | null;
  hasSteps: boolean;
  principal: string;
  /** The first RUN_ASKED_CHARS characters of the run's last user message; null when it has none. */
  asked: string | null;
}

/** How much of a run's question its summary carries (a list row, not the conversation). */
export const RUN_ASKED_CHARS = 120;

/** An agent's runs, newest first, one page of them, and how many there are. */
export async function listRunsOfAgent(db: Db, agentId: string, page: { limit: number; offset: number }): Promise<{ rows: RunSummary[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('runs')
      .select(['id', 'status', 'source', 'created_at', 'finished_at', 'error', 'principal', sql<boolean>`steps is not null`.as('has_steps')])
      // The message this run answered: a chat client resends the whole conversation, so its
      // last user message (the first would be the same for every turn of it). Cut in SQL: a
      // page of long conversations is not read whole for a list.
      .select(
        sql<string | null>`(select left(m->>'content', ${RUN_ASKED_CHARS}) from jsonb_array_elements(case when jsonb_typeof(request->'messages') = 'array' then request->'messages' else '[]'::jsonb end) with ordinality as t(m, i) where m->>'role' = 'user' order by i desc limit 1)`.as(
          'asked',
        ),
      )
      .where('agent_id', '=', agentId)
      .orderBy('created_at', 'desc')
      .orderBy('seq', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    db.selectFrom('runs').select((eb) => eb.fn.countAll<number>().as('n')).where('agent_id', '=', agentId).executeTakeFirstOrThrow(),
  ]);
  return {
    rows: rows.map((r) => ({ id: r.id, status: r.status, source: r.source, createdAt: r.created_at, finishedAt: r.finished_at, error: r.error, hasSteps: Boolean(r.has_steps), principal: r.principal, asked: r.asked })),
    total: Number(count.n),
  };
}

/** A run's agent, status and stored steps (null: none recorded), or undefined when no such run. */
/** A run's steps, with who asked (`principal`: whose contents the steps' debug messages are). */
export async function getRunSteps(db: Db, id: string): Promise<{ agentId: string; status: RunStatus; principal: string; steps: JsonValue | null } | undefined> {
  const row = await db.selectFrom('runs').select(['agent_id', 'status', 'principal', 'steps']).where('id', '=', id).executeTakeFirst();
  return row ? { agentId: row.agent_id, status: row.status, principal: row.principal, steps: row.steps } : undefined;
}

/** Is an earlier run of the same session still queued or running? Turns of a session go one at a time. */
export async function hasEarlierActiveRun(db: Db, sessionId: string, seq: number): Promise<boolean> {
  const row = await db
    .selectFrom('runs')
    .select('id')
    .where('session_id', '=', sessionId)
    .where('seq', '<', seq)
    .where('status', 'in', ACTIVE_RUN_STATUSES)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Ids of an agent's runs still queued or running (to cancel them when the agent goes). */
export async function listActiveRunIdsOfAgent(db: Db, agentId: string): Promise<string[]> {
  const rows = await db.selectFrom('runs').select('id').where('agent_id', '=', agentId).where('status', 'in', ACTIVE_RUN_STATUSES).execute();
  return rows.map((r) => r.id);
}

/**
 * Runs still queued or running that were created more than `olderThanMs` ago, oldest first (at
 * most `limit`): candidates for the sweep that enqueues a run again when its job was lost.
 */
export async function listUnfinishedRuns(db: Db, q: { olderThanMs: number; limit: number }): Promise<Array<{ id: string; status: RunStatus; createdAt: Date }>> {
  const rows = await db
    .selectFrom('runs')
    .select(['id', 'status', 'created_at'])
    .where('status', 'in', ACTIVE_RUN_STATUSES)
    .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${q.olderThanMs / 1000})`)
    .orderBy('created_at')
    .limit(q.limit)
    .execute();
  return rows.map((r) => ({ id: r.id, status: r.status, createdAt: r.created_at }));
}
