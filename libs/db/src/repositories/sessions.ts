import { randomUUID } from 'node:crypto';
import { sql, type ExpressionBuilder } from 'kysely';
import type { Db } from '../handle.js';
import { inTransaction } from '../transaction.js';
import type { Database, JsonValue, SessionMessageStatus } from '../tables.js';

export interface SessionRecord {
  id: string;
  agentId: string;
  sessionKey: string;
  channel: string;
  scope: string;
  /** The principal that opened it (`user:<name>`, `api:<account>`); '' for channel and open-mode chats. */
  owner: string;
  title: string;
  messageCount: number;
  /** User and assistant messages with text: what a reader counts (tool calls and results left out). */
  turnCount: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface SessionMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  toolCalls?: JsonValue | null;
  toolCallId?: string | null;
  name?: string | null;
}

export const SESSION_COLUMNS = ['id', 'agent_id', 'session_key', 'channel', 'scope', 'owner', 'title', 'message_count', 'created_at', 'updated_at'] as const;

export function toSession(r: {
  id: string;
  agent_id: string;
  session_key: string;
  channel: string;
  scope: string;
  owner: string;
  title: string;
  message_count: number;
  turn_count?: number | string | bigint | null;
  created_at: Date;
  updated_at: Date;
}): SessionRecord {
  return {
    id: r.id,
    agentId: r.agent_id,
    sessionKey: r.session_key,
    channel: r.channel,
    scope: r.scope,
    owner: r.owner,
    title: r.title,
    messageCount: r.message_count,
    turnCount: Number(r.turn_count ?? 0),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The session of (agent, channel, owner, key), created on first use. */
export async function ensureSession(
  db: Db,
  s: { agentId: string; sessionKey: string; channel?: string; scope?: string; owner?: string },
): Promise<SessionRecord> {
  const row = await db
    .insertInto('sessions')
    .values({ id: randomUUID(), agent_id: s.agentId, session_key: s.sessionKey, channel: s.channel ?? 'api', scope: s.scope ?? '', owner: s.owner ?? '' })
    .onConflict((oc) => oc.columns(['agent_id', 'channel', 'owner', 'session_key']).doUpdateSet({ updated_at: sql<Date>`sessions.updated_at` }))
    .returning(SESSION_COLUMNS)
    .executeTakeFirstOrThrow();
  return toSession(row);
}

/** User and assistant messages with text (`turnCount`), as a column of a `sessions` select. */
function turnCount(eb: ExpressionBuilder<Database, 'sessions'>) {
  return eb
    .selectFrom('session_messages as m')
    .select((c) => c.fn.countAll<number>().as('n'))
    .whereRef('m.session_id', '=', 'sessions.id')
    .where('m.role', 'in', ['user', 'assistant'])
    .where('m.content', '<>', '')
    .as('turn_count');
}

export async function getSession(db: Db, id: string): Promise<SessionRecord | undefined> {
  const row = await db.selectFrom('sessions').select(SESSION_COLUMNS).select(turnCount).where('id', '=', id).executeTakeFirst();
  return row && toSession(row);
}

/** The session a client names by its own key: (agent, channel, owner, key) is unique. */
export async function findSessionByKey(
  db: Db,
  q: { agentId: string; sessionKey: string; channel: string; owner: string },
): Promise<SessionRecord | undefined> {
  const row = await db
    .selectFrom('sessions')
    .select(SESSION_COLUMNS)
    .where('agent_id', '=', q.agentId)
    .where('session_key', '=', q.sessionKey)
    .where('channel', '=', q.channel)
    .where('owner', '=', q.owner)
    .executeTakeFirst();
  return row && toSession(row);
}

/** The last `limit` messages of completed turns, oldest first; with `throughRunId`, the last up to that run's turn. */
export async function loadHistory(db: Db, sessionId: string, limit: number, opts: { throughRunId?: string } = {}): Promise<SessionMessage[]> {
  const through = opts.throughRunId;
  const rows = await db
    .selectFrom('session_messages')
    .select(['id', 'role', 'content', 'tool_calls', 'tool_call_id', 'name'])
    .where('session_id', '=', sessionId)
    // A failed or stopped turn is shown to people, never sent to the model (docs/web-ui.md).
    .where('status', '=', 'ok')
    .$if(through !== undefined, (q) =>
      q.where('id', '<=', (eb) =>
        eb.selectFrom('session_messages').select((e) => e.fn.max('id').as('last')).where('session_id', '=', sessionId).where('run_id', '=', through!),
      ),
    )
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse().map((r) => ({
    role: r.role as SessionMessage['role'],
    content: r.content,
    ...(r.tool_calls !== null ? { toolCalls: r.tool_calls } : {}),
    ...(r.tool_call_id !== null ? { toolCallId: r.tool_call_id } : {}),
    ...(r.name !== null ? { name: r.name } : {}),
  }));
}

/** A stored message with its id (what a compaction names as its last). */
export type StoredSessionMessage = SessionMessage & { id: number };

/**
 * What a turn's context is made of: the session's newest summary (null when never compacted) and
 * the last `limit` messages it does not cover, oldest first.
 */
export async function loadContext(db: Db, sessionId: string, limit: number): Promise<{ summary: string | null; messages: StoredSessionMessage[] }> {
  const [summary, rows] = await Promise.all([
    db
      .selectFrom('session_summaries')
      .select('content')
      .where('session_id', '=', sessionId)
      .orderBy('through_message_id', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst(),
    db
      .selectFrom('session_messages')
      .select(['id', 'role', 'content', 'tool_calls', 'tool_call_id', 'name'])
      .where('session_id', '=', sessionId)
      .where('compacted_at', 'is', null)
      // A failed or stopped turn is shown to people, never sent to the model (docs/web-ui.md).
      .where('status', '=', 'ok')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute(),
  ]);
  const messages = rows.reverse().map((r) => ({
    id: Number(r.id),
    role: r.role as SessionMessage['role'],
    content: r.content,
    ...(r.tool_calls !== null ? { toolCalls: r.tool_calls } : {}),
    ...(r.tool_call_id !== null ? { toolCallId: r.tool_call_id } : {}),
    ...(r.name !== null ? { name: r.name } : {}),
  }));
  return { summary: summary?.content ?? null, messages };
}

/**
 * Stores a summary covering the session's messages up to `throughMessageId` and marks them
 * compacted, in one transaction: a turn reads either the old context or the new one, never a
 * summary without its messages marked (which would send them twice).
 */
export async function saveCompaction(db: Db, sessionId: string, content: string, throughMessageId: number): Promise<number> {
  return inTransaction(db, async (tx) => {
    await tx.insertInto('session_summaries').values({ session_id: sessionId, content, through_message_id: throughMessageId }).execute();
    const marked = await tx
      .updateTable('session_messages')
      .set({ compacted_at: sql<Date>`now()` })
      .where('session_id', '=', sessionId)
      .where('id', '<=', throughMessageId)
      .where('compacted_at', 'is', null)
      .executeTakeFirst();
    return Number(marked.numUpdatedRows);
  });
}

/** Appends a completed turn. Call inside the transaction that finishes the run. */
export async function appendMessages(db: Db, sessionId: string, runId: string, messages: SessionMessage[]): Promise<void> {
  await insertTurn(db, sessionId, runId, messages, 'ok', null);
}

/**
 * Keeps a turn that ended without an answer (`failed`, or `stopped` by its caller): the user's
 * messages and what was streamed, marked so that `loadHistory` leaves them out. Once per run: a
 * run that already has messages (a second writer, a retried commit) adds none; nor does a
 * session that is gone.
 */
export async function appendUnfinishedTurn(
  db: Db,
  sessionId: string,
  runId: string,
  turn: { status: Exclude<SessionMessageStatus, 'ok'>; error: string; messages: SessionMessage[] },
): Promise<boolean> {
  if (turn.messages.length === 0) return false;
  const existing = await db.selectFrom('session_messages').select('id').where('run_id', '=', runId).limit(1).executeTakeFirst();
  // The session may have gone while the turn ran (deleted with it, or with its agent): nothing to keep.
  const session = await db.selectFrom('sessions').select('id').where('id', '=', sessionId).executeTakeFirst();
  if (existing || !session) return false;
  await insertTurn(db, sessionId, runId, turn.messages, turn.status, turn.error);
  return true;
}

async function insertTurn(db: Db, sessionId: string, runId: string, messages: SessionMessage[], status: SessionMessageStatus, error: string | null): Promise<void> {
  if (messages.length === 0) return;
  await db
    .insertInto('session_messages')
    .values(
      messages.map((m) => ({
        session_id: sessionId,
        run_id: runId,
        role: m.role,
        content: m.content,
        tool_calls: m.toolCalls === undefined || m.toolCalls === null ? null : JSON.stringify(m.toolCalls),
        tool_call_id: m.toolCallId ?? null,
        name: m.name ?? null,
        status,
        error,
      })),
    )
    .execute();
  const firstUser = messages.find((m) => m.role === 'user')?.content ?? '';
  await db
    .updateTable('sessions')
    .set({
      message_count: sql<number>`message_count + ${messages.length}`,
      updated_at: sql<Date>`now()`,
      title: sql<string>`case when title = '' then ${firstUser.slice(0, 80)} else title end`,
    })
    .where('id', '=', sessionId)
    .execute();
}

/** `%`, `_` and backslash match themselves in a LIKE pattern (backslash is the default escape). */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * A page of sessions, newest first. `nonEmpty` leaves out sessions without a stored message (a
 * chat that never got past its first request); `search` matches the title or the key, any case.
 */
export async function listSessions(
  db: Db,
  q: { agentId?: string; owner?: string; nonEmpty?: boolean; search?: string; page: number; size: number },
): Promise<{ data: SessionRecord[]; total: number }> {
  let base = db.selectFrom('sessions');
  if (q.agentId) base = base.where('agent_id', '=', q.agentId);
  if (q.owner !== undefined) base = base.where('owner', '=', q.owner);
  if (q.nonEmpty) base = base.where('message_count', '>', 0);
  const search = q.search?.trim();
  if (search) base = base.where((eb) => eb.or([eb('title', 'ilike', likePattern(search)), eb('session_key', 'ilike', likePattern(search))]));
  const [rows, count] = await Promise.all([
    base
      .select(SESSION_COLUMNS)
      .select(turnCount)
      .orderBy('updated_at', 'desc')
      .orderBy('id')
      .limit(q.size)
      .offset((q.page - 1) * q.size)
      .execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { data: rows.map(toSession), total: Number(count.n) };
}

/** How many sessions a principal owns (`user:<name>`), over every agent: the session quota counts them. */
export async function countSessionsOfOwner(db: Db, owner: string): Promise<number> {
  const { n } = await db
    .selectFrom('sessions')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner', '=', owner)
    .executeTakeFirstOrThrow();
  return Number(n);
}

/** Gives a session a title of its owner's choosing (the first question names it until then). */
export async function renameSession(db: Db, id: string, title: string): Promise<void> {
  await db.updateTable('sessions').set({ title }).where('id', '=', id).execute();
}

/** Ids of a session's runs still queued or running (to cancel them when the session goes). */
export async function activeRunIdsOfSession(db: Db, sessionId: string): Promise<string[]> {
  const rows = await db.selectFrom('runs').select('id').where('session_id', '=', sessionId).where('status', 'in', ['queued', 'running']).execute();
  return rows.map((r) => r.id);
}

/** Deletes a session with its messages and runs (the foreign keys cascade). */
export async function deleteSession(db: Db, id: string): Promise<boolean> {
  const res = await db.deleteFrom('sessions').where('id', '=', id).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** Every stored message, oldest first, unfinished turns included (marked by `status`). */
export async function listSessionMessages(
  db: Db,
  sessionId: string,
): Promise<Array<SessionMessage & { createdAt: Date; runId: string | null; status: SessionMessageStatus; error: string | null; compactedAt: Date | null }>> {
  const rows = await db
    .selectFrom('session_messages')
    .select(['role', 'content', 'tool_calls', 'tool_call_id', 'name', 'run_id', 'created_at', 'status', 'error', 'compacted_at'])
    .where('session_id', '=', sessionId)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({
    role: r.role as SessionMessage['role'],
    content: r.content,
    toolCalls: r.tool_calls,
    toolCallId: r.tool_call_id,
    name: r.name,
    runId: r.run_id,
    createdAt: r.created_at,
    status: r.status,
    error: r.error,
    compactedAt: r.compacted_at,
  }));
}

/**
 * Forgets the conversation of every session matching the given fields (omitted fields match any).
 * `scope` narrows only sessions that have one (channel chats): a chat-completions session is
 * named by its `sessionId` alone and stores none, so whatever scope a client sends matches it.
 */
export async function clearSessions(
  db: Db,
  q: { agentId?: string; sessionKey?: string; channel?: string; scope?: string; owner?: string },
): Promise<number> {
  let sessions = db.selectFrom('sessions').select('id');
  if (q.owner !== undefined) sessions = sessions.where('owner', '=', q.owner);
  if (q.agentId) sessions = sessions.where('agent_id', '=', q.agentId);
  if (q.sessionKey) sessions = sessions.where('session_key', '=', q.sessionKey);
  if (q.channel) sessions = sessions.where('channel', '=', q.channel);
  const scope = q.scope;
  if (scope) sessions = sessions.where((eb) => eb.or([eb('scope', '=', scope), eb('scope', '=', '')]));
  const ids = (await sessions.execute()).map((r) => r.id);
  if (ids.length === 0) return 0;
  await db.deleteFrom('session_messages').where('session_id', 'in', ids).execute();
  await db.deleteFrom('session_summaries').where('session_id', 'in', ids).execute();
  await db.updateTable('sessions').set({ message_count: 0, title: '', updated_at: sql<Date>`now()` }).where('id', 'in', ids).execute();
  return ids.length;
}

/** The id of the last message a run left in a session, or undefined when it left none. */
async function lastMessageOfRun(db: Db, sessionId: string, runId: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('session_messages')
    .select((eb) => eb.fn.max('id').as('last'))
    .where('session_id', '=', sessionId)
    .where('run_id', '=', runId)
    .executeTakeFirst();
  return row?.last ?? undefined;
}

/**
 * The session a turn continuing from run `throughRunId` goes on in. When that run's turn is the
 * session's last, the session itself; when later turns followed it (the caller went back to an
 * earlier answer), a new session `into` holding a copy of the conversation up to and including
 * that run's turn, so the later turns are not part of this branch.
 */
export async function branchSessionAt(
  db: Db,
  from: SessionRecord,
  throughRunId: string,
  into: { sessionKey: string },
): Promise<SessionRecord> {
  const last = await lastMessageOfRun(db, from.id, throughRunId);
  if (last === undefined) return from;
  const later = await db.selectFrom('session_messages').select('id').where('session_id', '=', from.id).where('id', '>', last).limit(1).executeTakeFirst();
  if (!later) return from;
  const branch = await ensureSession(db, { agentId: from.agentId, sessionKey: into.sessionKey, channel: from.channel, scope: from.scope, owner: from.owner });
  await db
    .insertInto('session_messages')
    .columns(['session_id', 'role', 'content', 'tool_calls', 'tool_call_id', 'name', 'run_id', 'created_at', 'status', 'error'])
    .expression(
      db
        .selectFrom('session_messages')
        .select([sql<string>`${branch.id}`.as('session_id'), 'role', 'content', 'tool_calls', 'tool_call_id', 'name', 'run_id', 'created_at', 'status', 'error'])
        .where('session_id', '=', from.id)
        .where('id', '<=', last)
        .orderBy('id'),
    )
    .execute();
  const copied = await db.selectFrom('session_messages').select((eb) => eb.fn.countAll<number>().as('n')).where('session_id', '=', branch.id).executeTakeFirstOrThrow();
  await db.updateTable('sessions').set({ message_count: Number(copied.n), title: from.title }).where('id', '=', branch.id).execute();
  return { ...branch, messageCount: Number(copied.n), title: from.title };
}
