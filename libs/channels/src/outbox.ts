import { randomUUID } from 'node:crypto';
import { activeTraceparent, PubSubChannels, QueueNames, type ChannelSendJob, type OutboundChannel, type OutboundOutcomeMessage } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import {
  getOutboundMessage,
  insertOutboundMessage,
  listChannelAccounts,
  type ChannelAccountRecord,
  type Db,
  type NewOutboundMessage,
  type OutboundMessageRecord,
} from '@agentry/db';

/** The queue side of the bus as the outbox needs it. */
export interface OutboxQueue {
  enqueue(queue: typeof QueueNames.channelSend, data: ChannelSendJob, opts?: { jobId?: string; delayMs?: number }): Promise<string>;
}

/** The pub/sub side of the bus as the outbox needs it. */
export interface OutboxEvents {
  subscribe(channel: OutboundChannel, handler: (message: OutboundOutcomeMessage) => void): Promise<() => Promise<void>>;
}

export type OutboundInput = Omit<NewOutboundMessage, 'id'>;

export function newOutboundId(): string {
  return `om_${randomUUID().replace(/-/g, '')}`;
}

/**
 * The `channel-send` job of a message. Each try has its own job id (an id whose job still waits or
 * runs adds nothing, and a retry is enqueued while the failing try's job is still active).
 */
export async function enqueueOutbound(queue: OutboxQueue, messageId: string, opts: { attempt?: number; delayMs?: number } = {}): Promise<void> {
  // Queued inside a traced run (or a traced send's retry), the send joins that trace (v2).
  const traceparent = activeTraceparent();
  const job: ChannelSendJob = traceparent ? { type: 'channel-send', v: 2, messageId, traceparent } : { type: 'channel-send', v: 1, messageId };
  const jobId = opts.attempt ? `${messageId}-r${opts.attempt}` : messageId;
  await queue.enqueue(QueueNames.channelSend, job, { jobId, ...(opts.delayMs ? { delayMs: opts.delayMs } : {}) });
}

/**
 * Queues a message: the row first (outbox rule), then its job. A job that cannot be enqueued is
 * not an error here: the row stays `queued` and the connector's sweep enqueues it again.
 * Pass a transaction as `db` to make the message part of a larger commit, and enqueue after it
 * with `enqueueOutbound`.
 */
export async function queueOutbound(db: Db, input: OutboundInput): Promise<string> {
  const id = newOutboundId();
  await insertOutboundMessage(db, { ...input, id });
  return id;
}

export type SendOutcome =
  | { kind: 'sent'; message: OutboundMessageRecord }
  | { kind: 'failed'; message: OutboundMessageRecord }
  | { kind: 'pending'; message: OutboundMessageRecord };

/**
 * Queues a message and waits (bounded) for the connector to finish it. Subscribes before the
 * job exists, and reads the row on every outcome event and every `pollMs`, so a lost event
 * delays the answer by one poll at most (the row is the truth). `pending` means the wait ended
 * first: the message is still queued or being retried and may yet be sent.
 */
export async function sendAndWait(
  deps: { db: Db; queue: OutboxQueue; events: OutboxEvents },
  input: OutboundInput,
  opts: { timeoutMs: number; pollMs?: number; signal?: AbortSignal },
): Promise<SendOutcome> {
  const id = newOutboundId();
  let wake: (() => void) | undefined;
  let unsubscribe: () => Promise<void> = async () => undefined;
  try {
    unsubscribe = await deps.events.subscribe(PubSubChannels.outbound(id), () => wake?.());
  } catch {
    // Without pub/sub the poll alone finds the outcome.
  }
  try {
    await insertOutboundMessage(deps.db, { ...input, id });
    try {
      await enqueueOutbound(deps.queue, id);
    } catch {
      // The sweep enqueues it later; the caller learns the outcome as usual (or `pending`).
    }
    const deadline = Date.now() + opts.timeoutMs;
    const pollMs = opts.pollMs ?? 1000;
    for (;;) {
      const row = await getOutboundMessage(deps.db, id);
      if (!row) throw new Error(`outbound message ${id} vanished`);
      if (row.status === 'sent') return { kind: 'sent', message: row };
      if (row.status === 'failed') return { kind: 'failed', message: row };
      const left = deadline - Date.now();
      if (left <= 0 || opts.signal?.aborted) return { kind: 'pending', message: row };
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(pollMs, left));
        const onAbort = () => done();
        opts.signal?.addEventListener('abort', onAbort, { once: true });
        function done() {
          clearTimeout(timer);
          opts.signal?.removeEventListener('abort', onAbort);
          wake = undefined;
          resolve();
        }
        wake = done;
      });
    }
  } finally {
    await unsubscribe().catch(() => undefined);
  }
}

/**
 * The account a send goes through: the given one (it must exist and be enabled), else the
 * platform's first enabled account. Errors are the API's (404 unknown account, 400 otherwise).
 */
export async function sendingAccount(db: Db, platform: string, accountId: string | undefined): Promise<ChannelAccountRecord> {
  const accounts = await listChannelAccounts(db, platform);
  if (accountId !== undefined) {
    const account = accounts.find((a) => a.id === accountId);
    if (!account) throw new Errors.NOT_FOUND(`${platform} account "${accountId}"`);
    if (!account.enabled) throw new Errors.VALIDATION(`${platform} account "${accountId}" is disabled`);
    return account;
  }
  const first = accounts.find((a) => a.enabled);
  if (!first) throw new Errors.VALIDATION(`no enabled ${platform} account to send through; create one with POST /api/v1/channels/${platform}/accounts`);
  return first;
}
