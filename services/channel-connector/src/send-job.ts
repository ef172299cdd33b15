import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import { ChannelSendJob, PubSubChannels, QueueNames, type OutboundOutcomeMessage } from '@agentry/contracts';
import { UnrecoverableJobError, type Bus, type Job } from '@agentry/bus';
import { accountContext, adapterFor, enqueueOutbound, splitText, type AdapterIo, type OutboundPayload, type PlatformError } from '@agentry/channels';
import {
  claimOutboundMessage,
  finishOutboundMessage,
  settleCronDelivery,
  getChannelAccount,
  requeueOutboundMessage,
  setOutboundProgress,
  type Db,
  type OutboundMessageRecord,
} from '@agentry/db';
import { contextFromTraceparent, inSpan, tracingEnabled, type serviceMetrics, type Runtime } from '@agentry/runtime';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { mediaOf } from './media.js';
import { finalError, retryDelayMs, shouldRetry, type RetryPolicy } from './retry-policy.js';

type Adapter = NonNullable<ReturnType<typeof adapterFor>>;
type Account = ReturnType<typeof accountContext>;

export interface SendJobContext {
  db: Db;
  bus: Pick<Bus, 'queue' | 'pubsub'>;
  logger: Logger;
  secrets: Runtime['secrets'];
  io: AdapterIo;
  /** The media area (`<data root_dir>/media/`) that `media` payloads name files of. */
  mediaDir: string;
  policy: RetryPolicy;
  /** How long a claim lasts: a connector that died mid-send frees its message after this. */
  claimMs: number;
  metrics: {
    sends: ReturnType<typeof serviceMetrics.channelSends>;
    retries: ReturnType<typeof serviceMetrics.channelRetries>;
    jobDuration: ReturnType<typeof serviceMetrics.jobDuration>;
  };
}

/** The `channel-send` job: checks the payload, delivers the message and times the job. */
export function sendJobHandler(ctx: SendJobContext): (job: Job<unknown>) => Promise<void> {
  return async (job) => {
    if (!Value.Check(ChannelSendJob, job.data)) throw new UnrecoverableJobError(`malformed channel-send payload: ${JSON.stringify(job.data)}`);
    const started = Date.now();
    let outcome = 'ok';
    try {
      const { messageId } = job.data;
      // Traced, the send is a span under the run (or the earlier try) that queued it; untraced, none is made.
      if (!tracingEnabled()) await deliver(ctx, messageId);
      else {
        const parent = job.data.v === 2 ? contextFromTraceparent(job.data.traceparent) : undefined;
        await inSpan('channel send', { kind: SpanKind.PRODUCER, attributes: { 'agentry.outbound.id': messageId }, ...(parent ? { parent } : {}) }, () => deliver(ctx, messageId));
      }
    } catch (err) {
      outcome = 'error';
      throw err;
    } finally {
      ctx.metrics.jobDuration.observe({ queue: QueueNames.channelSend, outcome }, (Date.now() - started) / 1000);
    }
  };
}

/**
 * Claims the message and sends it through its account's adapter, recording `sent`; a failure is
 * retried or recorded `failed` as the retry policy says.
 */
async function deliver(ctx: SendJobContext, messageId: string): Promise<void> {
  const m = await claimOutboundMessage(ctx.db, messageId, ctx.claimMs);
  if (!m) return; // Sent, failed, or being sent by another try.
  const log = ctx.logger.child({ outboundId: m.id, platform: m.platform, accountId: m.accountId, runId: m.runId ?? undefined });
  const span = trace.getActiveSpan();
  span?.updateName(`channel send ${m.platform}`);
  span?.setAttributes({ 'agentry.channel.platform': m.platform, 'agentry.channel.account': m.accountId, 'agentry.run.id': m.runId ?? '', 'agentry.outbound.attempt': m.attempts });
  const started = Date.now();
  try {
    const adapter = adapterFor(m.platform as Parameters<typeof adapterFor>[0]);
    if (!adapter) return await fail(ctx, m, `"${m.platform}" is not a messaging platform`);
    const record = await getChannelAccount(ctx.db, m.platform, m.accountId);
    if (!record) return await fail(ctx, m, `${m.platform} account "${m.accountId}" no longer exists`);
    if (!record.enabled) return await fail(ctx, m, `${m.platform} account "${m.accountId}" is disabled`);
    const platformMessageId = await send(ctx, m, adapter, accountContext(record, ctx.secrets));
    await finishOutboundMessage(ctx.db, m.id, { status: 'sent', platformMessageId: platformMessageId ?? '' });
    await settleFireDelivery(ctx, m, { status: 'sent', error: null });
    ctx.metrics.sends.inc({ platform: m.platform, status: 'sent' });
    await publishOutcome(ctx, m.id, 'sent');
    log.info({ kind: m.kind, attempts: m.attempts, durationMs: Date.now() - started, platformMessageId }, 'outbound message sent');
  } catch (err) {
    if (shouldRetry(ctx.policy, err, m.attempts)) return await retryLater(ctx, m, err, log);
    const error = finalError(err, m.attempts);
    if (error !== undefined) return await fail(ctx, m, error);
    log.error({ err }, 'outbound message failed unexpectedly');
    return await fail(ctx, m, 'the connector failed unexpectedly while sending');
  }
}

/** Sends the message's content; answers the platform's id of the message (of its first part for a long text). */
async function send(ctx: SendJobContext, m: OutboundMessageRecord, adapter: Adapter, account: Account): Promise<string | null | undefined> {
  if (m.kind !== 'text') {
    const media = await mediaOf(ctx.db, ctx.mediaDir, m);
    const payload: OutboundPayload = m.kind === 'image' ? { kind: 'image', image: media } : { kind: 'file', file: media };
    return (await adapter.send(account, ctx.io, m.chatId, payload)).messageId;
  }
  let messageId = m.platformMessageId;
  const parts = splitText(String(m.payload.text ?? ''), adapter.textLimit);
  for (let i = m.partsSent; i < parts.length; i++) {
    const sent = await adapter.send(account, ctx.io, m.chatId, { kind: 'text', text: parts[i]! });
    // The first part's id names the message (replies and edits address it).
    messageId ??= sent.messageId;
    await setOutboundProgress(ctx.db, m.id, i + 1, messageId);
  }
  return messageId;
}

/** Puts the message back, due after the policy's delay, and enqueues its next try. */
async function retryLater(ctx: SendJobContext, m: OutboundMessageRecord, err: PlatformError, log: Logger): Promise<void> {
  const delayMs = retryDelayMs(ctx.policy, m.attempts, err.retryAfterMs);
  // This try failed (its span says so); the next one is a span under it.
  trace.getActiveSpan()?.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
  await requeueOutboundMessage(ctx.db, m.id, delayMs, err.message);
  ctx.metrics.retries.inc({ platform: m.platform });
  log.warn({ attempts: m.attempts, delayMs, status: err.status, error: err.message }, 'outbound message will be retried');
  // If this enqueue fails the sweep finds the message once it is past due.
  await enqueueOutbound(ctx.bus.queue, m.id, { attempt: m.attempts, delayMs }).catch((e: unknown) =>
    log.warn({ err: e }, 'could not enqueue the retry; the sweep will'),
  );
}

async function fail(ctx: SendJobContext, m: OutboundMessageRecord, error: string): Promise<void> {
  trace.getActiveSpan()?.setStatus({ code: SpanStatusCode.ERROR, message: error });
  await finishOutboundMessage(ctx.db, m.id, { status: 'failed', error });
  await settleFireDelivery(ctx, m, { status: 'failed', error });
  ctx.metrics.sends.inc({ platform: m.platform, status: 'failed' });
  await publishOutcome(ctx, m.id, 'failed');
  ctx.logger.warn({ outboundId: m.id, platform: m.platform, accountId: m.accountId, runId: m.runId, attempts: m.attempts, error }, 'outbound message failed');
}

/**
 * An agent's answer to a cron or heartbeat fire: its `cron_runs` row records the delivery (the
 * worker recorded the answer). A failure here loses only that record: the message is sent.
 */
async function settleFireDelivery(ctx: SendJobContext, m: OutboundMessageRecord, delivery: { status: 'sent' | 'failed'; error: string | null }): Promise<void> {
  if (!m.runId || m.source !== 'agent') return;
  try {
    await settleCronDelivery(ctx.db, m.runId, delivery);
  } catch (err) {
    ctx.logger.warn({ err, outboundId: m.id, runId: m.runId }, "could not record the delivery on the run's cron record");
  }
}

async function publishOutcome(ctx: SendJobContext, id: string, status: 'sent' | 'failed'): Promise<void> {
  try {
    await ctx.bus.pubsub.publish(PubSubChannels.outbound(id), { id, status } satisfies OutboundOutcomeMessage);
  } catch (err) {
    // Waiters poll the row too; they learn the outcome a poll later.
    ctx.logger.warn({ err, outboundId: id }, 'could not publish an outbound outcome');
  }
}
