import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { JsonValue, OutboundStatus } from '../tables.js';

export interface BindingRecord {
  agentId: string;
  match: { default?: boolean; channel?: string; accountId?: string };
}

/** The bindings in their stored order. */
export async function listBindings(db: Db): Promise<BindingRecord[]> {
  const rows = await db.selectFrom('bindings').selectAll().orderBy('position').execute();
  return rows.map((r) => ({
    agentId: r.agent_id,
    match: {
      ...(r.match_default ? { default: true } : {}),
      ...(r.match_channel !== null ? { channel: r.match_channel } : {}),
      ...(r.match_account_id !== null ? { accountId: r.match_account_id } : {}),
    },
  }));
}

/**
 * Is there a binding of `agentId` to `platform` that names `accountId` or no account (the whole
 * platform)? One indexed look-up instead of reading every binding.
 */
export async function agentBoundTo(db: Db, agentId: string, platform: string, accountId: string): Promise<boolean> {
  const row = await db
    .selectFrom('bindings')
    .select('position')
    .where('agent_id', '=', agentId)
    .where('match_channel', '=', platform)
    .where((eb) => eb.or([eb('match_account_id', 'is', null), eb('match_account_id', '=', accountId)]))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Replaces the whole list (call inside a transaction). */
/**
 * Makes the other writers of the bindings list wait until this transaction ends. The list is
 * ordered by `position`: two accounts created at once with a binding each both took the same next
 * position, and the second failed (it was answered as a duplicate api key); a delete reading the
 * list while another write replaced it lost that write. Call it first in the transaction, before
 * reading the list; a no-op outside one.
 */
export async function lockBindings(db: Db): Promise<void> {
  if (db.isTransaction) await sql`select pg_advisory_xact_lock(hashtext('agentry.bindings'))`.execute(db);
}

export async function replaceBindings(db: Db, bindings: readonly BindingRecord[]): Promise<void> {
  await lockBindings(db);
  await db.deleteFrom('bindings').execute();
  await insertBindingsAt(db, 0, bindings);
}

/** Appends one binding at the end of the list. */
export async function appendBinding(db: Db, binding: BindingRecord): Promise<void> {
  await lockBindings(db);
  const { next } = await db
    .selectFrom('bindings')
    .select(sql<number>`coalesce(max(position) + 1, 0)`.as('next'))
    .executeTakeFirstOrThrow();
  await insertBindingsAt(db, Number(next), [binding]);
}

async function insertBindingsAt(db: Db, start: number, bindings: readonly BindingRecord[]): Promise<void> {
  if (bindings.length === 0) return;
  await db
    .insertInto('bindings')
    .values(
      bindings.map((b, i) => ({
        position: start + i,
        agent_id: b.agentId,
        match_default: b.match.default === true,
        match_channel: b.match.channel ?? null,
        match_account_id: b.match.accountId ?? null,
      })),
    )
    .execute();
}

export type OutboundKind = 'text' | 'image' | 'file';

export interface OutboundMessageRecord {
  id: string;
  platform: string;
  accountId: string;
  chatId: string;
  kind: OutboundKind;
  /** text: `{text}`; image/file: `{agentId, path}` or `{key}`, plus `fileName`. */
  payload: Record<string, JsonValue>;
  /** Who sent it: `api`, `agent` (a reply), `tool`, `cron`. */
  source: string;
  runId: string | null;
  status: OutboundStatus;
  attempts: number;
  partsSent: number;
  platformMessageId: string | null;
  error: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

type OutboundRow = {
  id: string;
  platform: string;
  account_id: string;
  chat_id: string;
  kind: string;
  payload: JsonValue;
  source: string;
  run_id: string | null;
  status: OutboundStatus;
  attempts: number;
  parts_sent: number;
  platform_message_id: string | null;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
};

const OUTBOUND_COLUMNS = [
  'id',
  'platform',
  'account_id',
  'chat_id',
  'kind',
  'payload',
  'source',
  'run_id',
  'status',
  'attempts',
  'parts_sent',
  'platform_message_id',
  'error',
  'created_at',
  'finished_at',
] as const;

function toOutbound(r: OutboundRow): OutboundMessageRecord {
  return {
    id: r.id,
    platform: r.platform,
    accountId: r.account_id,
    chatId: r.chat_id,
    kind: r.kind as OutboundKind,
    payload: (r.payload ?? {}) as Record<string, JsonValue>,
    source: r.source,
    runId: r.run_id,
    status: r.status,
    attempts: r.attempts,
    partsSent: r.parts_sent,
    platformMessageId: r.platform_message_id,
    error: r.error,
    createdAt: r.created_at,
    finishedAt: r.finished_at,
  };
}

export interface NewOutboundMessage {
  id: string;
  platform: string;
  accountId: string;
  chatId: string;
  kind: OutboundKind;
  payload: Record<string, JsonValue>;
  source: string;
  runId?: string | null;
}

export async function insertOutboundMessage(db: Db, m: NewOutboundMessage): Promise<void> {
  await db
    .insertInto('outbound_messages')
    .values({
      id: m.id,
      platform: m.platform,
      account_id: m.accountId,
      chat_id: m.chatId,
      kind: m.kind,
      payload: JSON.stringify(m.payload),
      source: m.source,
      run_id: m.runId ?? null,
    })
    .execute();
}

export async function getOutboundMessage(db: Db, id: string): Promise<OutboundMessageRecord | undefined> {
  const row = await db.selectFrom('outbound_messages').select(OUTBOUND_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row ? toOutbound(row as OutboundRow) : undefined;
}

/**
 * Claims a message for sending: only a queued message, or one whose claim lapsed (its connector
 * died mid-send), is taken, so two deliveries of its job never send it twice at once.
 */
export async function claimOutboundMessage(db: Db, id: string, claimMs: number): Promise<OutboundMessageRecord | undefined> {
  const row = await db
    .updateTable('outbound_messages')
    .set({
      status: 'sending',
      attempts: sql<number>`attempts + 1`,
      claimed_until: sql<Date>`now() + ${`${claimMs} milliseconds`}::interval`,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('status', '=', 'queued'), eb.and([eb('status', '=', 'sending'), eb('claimed_until', '<', sql<Date>`now()`)])]))
    .returning(OUTBOUND_COLUMNS)
    .executeTakeFirst();
  return row ? toOutbound(row as OutboundRow) : undefined;
}

/** Records progress through a split message, so a retry resumes after the parts already sent. */
export async function setOutboundProgress(db: Db, id: string, partsSent: number, platformMessageId: string | null): Promise<void> {
  await db
    .updateTable('outbound_messages')
    .set({ parts_sent: partsSent, platform_message_id: platformMessageId, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/** Puts a claimed message back in the queue for another try no earlier than `delayMs` from now. */
export async function requeueOutboundMessage(db: Db, id: string, delayMs: number, error: string): Promise<void> {
  await db
    .updateTable('outbound_messages')
    .set({
      status: 'queued',
      error,
      claimed_until: null,
      next_attempt_at: sql<Date>`now() + ${`${delayMs} milliseconds`}::interval`,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .where('status', '=', 'sending')
    .execute();
}

/** The final state of a message. */
export async function finishOutboundMessage(
  db: Db,
  id: string,
  outcome: { status: 'sent'; platformMessageId: string | null } | { status: 'failed'; error: string },
): Promise<void> {
  await db
    .updateTable('outbound_messages')
    .set({
      status: outcome.status,
      ...(outcome.status === 'sent' ? { platform_message_id: outcome.platformMessageId, error: null } : { error: outcome.error }),
      claimed_until: null,
      updated_at: sql<Date>`now()`,
      finished_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .execute();
}

/**
 * Messages whose job may be lost: queued and due for more than `graceMs`, or claimed by a
 * connector whose claim lapsed. The sweep enqueues them again (the claim keeps that safe).
 */
export async function listStrandedOutbound(db: Db, graceMs: number, limit = 100): Promise<Array<{ id: string; attempts: number }>> {
  return db
    .selectFrom('outbound_messages')
    .select(['id', 'attempts'])
    .where((eb) =>
      eb.or([
        eb.and([eb('status', '=', 'queued'), eb('next_attempt_at', '<', sql<Date>`now() - ${`${graceMs} milliseconds`}::interval`)]),
        eb.and([eb('status', '=', 'sending'), eb('claimed_until', '<', sql<Date>`now()`)]),
      ]),
    )
    .orderBy('next_attempt_at')
    .limit(limit)
    .execute();
}

/**
 * Records an inbound event id; false when it was seen before (a duplicate delivery). The
 * first delivery wins even when two arrive at once on different replicas (primary key).
 */
export async function recordInboundEvent(db: Db, e: { platform: string; accountId: string; eventId: string }): Promise<boolean> {
  const rows = await db
    .insertInto('inbound_events')
    .values({ platform: e.platform, account_id: e.accountId, event_id: e.eventId })
    .onConflict((oc) => oc.columns(['platform', 'account_id', 'event_id']).doNothing())
    .returning('event_id')
    .execute();
  return rows.length > 0;
}

export async function setInboundEventRun(db: Db, e: { platform: string; accountId: string; eventId: string }, runId: string): Promise<void> {
  await db
    .updateTable('inbound_events')
    .set({ run_id: runId })
    .where('platform', '=', e.platform)
    .where('account_id', '=', e.accountId)
    .where('event_id', '=', e.eventId)
    .execute();
}

/** Undoes recordInboundEvent when the event could not be turned into a run (so a redelivery is not dropped). */
export async function forgetInboundEvent(db: Db, e: { platform: string; accountId: string; eventId: string }): Promise<void> {
  await db
    .deleteFrom('inbound_events')
    .where('platform', '=', e.platform)
    .where('account_id', '=', e.accountId)
    .where('event_id', '=', e.eventId)
    .execute();
}

/** The outbound message a run's answer went out as (its reply), if any. */
export async function getOutboundByRun(db: Db, runId: string): Promise<OutboundMessageRecord | undefined> {
  const row = await db.selectFrom('outbound_messages').select(OUTBOUND_COLUMNS).where('run_id', '=', runId).orderBy('created_at').executeTakeFirst();
  return row ? toOutbound(row as OutboundRow) : undefined;
}
