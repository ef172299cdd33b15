import { Value } from 'typebox/value';
import { ChannelSendJob, PubSubChannels, QueueNames, type OutboundOutcomeMessage } from '@agentry/contracts';
import { UnrecoverableJobError, type Consumer } from '@agentry/bus';
import {
  AccountConfigError,
  accountContext,
  adapterFor,
  enqueueOutbound,
  MemoryTokenCache,
  PlatformError,
  splitText,
  UnsupportedOperationError,
  type AdapterIo,
  type MediaSource,
  type OutboundPayload,
} from '@agentry/channels';
import {
  claimOutboundMessage,
  finishOutboundMessage,
  getChannelAccount,
  listStrandedOutbound,
  pruneInboundEvents,
  readWorkspaceFile,
  requeueOutboundMessage,
  setOutboundProgress,
  type OutboundMessageRecord,
} from '@agentry/db';
import { registerQueueDepth, serviceMetrics, type Runtime } from '@agentry/runtime';

export interface ConnectorOptions {
  /** Sends of one process at once. */
  concurrency: number;
  /** Tries per message, the first included, for retryable failures (5xx, 429, network). */
  maxAttempts: number;
  /** First retry delay; doubles per try up to `maxBackoffMs`. A platform's Retry-After wins. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** How long a claim lasts: a connector that died mid-send frees its message after this. */
  claimMs: number;
  /** Deadline of one platform HTTP call. */
  requestTimeoutMs: number;
  /** How often the sweep looks for messages whose job was lost. */
  sweepMs: number;
  /** How long past due a queued message must be before the sweep enqueues it again. */
  sweepGraceMs: number;
  /** Inbound event ids are kept this long for duplicate detection. */
  inboundRetentionMs: number;
  /** Tests substitute the HTTP client. */
  fetch: typeof fetch;
}

export const DEFAULT_CONNECTOR_OPTIONS: ConnectorOptions = {
  concurrency: 10,
  maxAttempts: 5,
  baseBackoffMs: 1000,
  maxBackoffMs: 60_000,
  claimMs: 120_000,
  requestTimeoutMs: 15_000,
  sweepMs: 15_000,
  sweepGraceMs: 30_000,
  inboundRetentionMs: 7 * 24 * 3600_000,
  fetch: globalThis.fetch,
};

/**
 * Sends outbound messages: consumes `channel-send {v:1, messageId}`, claims the message row,
 * sends it through its account's adapter (long texts split at the platform's limit, resuming
 * after the parts already sent), and records the outcome. Retryable failures (5xx, 429, network)
 * are tried again with exponential backoff or after the platform's Retry-After, each try a new
 * delayed job; 4xx and bad accounts fail at once. A sweep re-enqueues messages whose job was
 * lost (queue outage, crash between commit and enqueue), so every committed message ends sent
 * or failed. Delivery is at least once: a connector killed after the platform accepted a message
 * but before the row was updated sends it again when its claim lapses.
 */
export async function startChannelConnector(runtime: Runtime, overrides: Partial<ConnectorOptions> = {}): Promise<void> {
  const opts: ConnectorOptions = { ...DEFAULT_CONNECTOR_OPTIONS, ...overrides };
  const { db, bus, logger } = runtime;
  const io: AdapterIo = { fetch: opts.fetch, tokens: new MemoryTokenCache(), now: Date.now, timeoutMs: opts.requestTimeoutMs };

  const sends = serviceMetrics.channelSends(runtime.metrics);
  const retries = serviceMetrics.channelRetries(runtime.metrics);
  const jobDuration = serviceMetrics.jobDuration(runtime.metrics);
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));

  const publishOutcome = async (id: string, status: 'sent' | 'failed') => {
    try {
      await bus.pubsub.publish(PubSubChannels.outbound(id), { id, status } satisfies OutboundOutcomeMessage);
    } catch (err) {
      // Waiters poll the row too; they learn the outcome a poll later.
      logger.warn({ err, outboundId: id }, 'could not publish an outbound outcome');
    }
  };

  const fail = async (m: OutboundMessageRecord, error: string) => {
    await finishOutboundMessage(db.db, m.id, { status: 'failed', error });
    sends.inc({ platform: m.platform, status: 'failed' });
    await publishOutcome(m.id, 'failed');
    logger.warn({ outboundId: m.id, platform: m.platform, accountId: m.accountId, runId: m.runId, attempts: m.attempts, error }, 'outbound message failed');
  };

  const deliver = async (messageId: string): Promise<void> => {
    const m = await claimOutboundMessage(db.db, messageId, opts.claimMs);
    if (!m) return; // Sent, failed, or being sent by another try.
    const log = logger.child({ outboundId: m.id, platform: m.platform, accountId: m.accountId, runId: m.runId ?? undefined });
    const started = Date.now();
    try {
      const adapter = adapterFor(m.platform as Parameters<typeof adapterFor>[0]);
      if (!adapter) return await fail(m, `"${m.platform}" is not a messaging platform`);
      const record = await getChannelAccount(db.db, m.platform, m.accountId);
      if (!record) return await fail(m, `${m.platform} account "${m.accountId}" no longer exists`);
      if (!record.enabled) return await fail(m, `${m.platform} account "${m.accountId}" is disabled`);
      const account = accountContext(record, runtime.secrets);

      let messageId = m.platformMessageId;
      if (m.kind === 'text') {
        const parts = splitText(String(m.payload.text ?? ''), adapter.textLimit);
        for (let i = m.partsSent; i < parts.length; i++) {
          const sent = await adapter.send(account, io, m.chatId, { kind: 'text', text: parts[i]! });
          // The first part's id names the message (replies and edits address it).
          messageId ??= sent.messageId;
          await setOutboundProgress(db.db, m.id, i + 1, messageId);
        }
      } else {
        const media = await mediaOf(m);
        const payload: OutboundPayload = m.kind === 'image' ? { kind: 'image', image: media } : { kind: 'file', file: media };
        messageId = (await adapter.send(account, io, m.chatId, payload)).messageId;
      }
      await finishOutboundMessage(db.db, m.id, { status: 'sent', platformMessageId: messageId ?? '' });
      sends.inc({ platform: m.platform, status: 'sent' });
      await publishOutcome(m.id, 'sent');
      log.info({ kind: m.kind, attempts: m.attempts, durationMs: Date.now() - started, platformMessageId: messageId }, 'outbound message sent');
    } catch (err) {
      if (err instanceof PlatformError && err.retryable && m.attempts < opts.maxAttempts) {
        const backoff = Math.min(opts.maxBackoffMs, opts.baseBackoffMs * 2 ** (m.attempts - 1));
        const delayMs = Math.max(err.retryAfterMs ?? 0, backoff);
        await requeueOutboundMessage(db.db, m.id, delayMs, err.message);
        retries.inc({ platform: m.platform });
        log.warn({ attempts: m.attempts, delayMs, status: err.status, error: err.message }, 'outbound message will be retried');
        // If this enqueue fails the sweep finds the message once it is past due.
        await enqueueOutbound(bus.queue, m.id, { attempt: m.attempts, delayMs }).catch((e: unknown) =>
          log.warn({ err: e }, 'could not enqueue the retry; the sweep will'),
        );
        return;
      }
      if (err instanceof PlatformError || err instanceof UnsupportedOperationError || err instanceof AccountConfigError || err instanceof MediaError) {
        return await fail(m, err instanceof PlatformError && err.retryable ? `${err.message} (gave up after ${m.attempts} tries)` : err.message);
      }
      log.error({ err }, 'outbound message failed unexpectedly');
      return await fail(m, 'the connector failed unexpectedly while sending');
    }
  };

  const mediaOf = async (m: OutboundMessageRecord): Promise<MediaSource> => {
    const fileName = typeof m.payload.fileName === 'string' ? m.payload.fileName : undefined;
    if (typeof m.payload.key === 'string') return fileName ? { key: m.payload.key, fileName } : { key: m.payload.key };
    const agentId = String(m.payload.agentId ?? '');
    const path = String(m.payload.path ?? '');
    const file = await readWorkspaceFile(db.db, agentId, path);
    if (!file?.content) throw new MediaError(`no file "${path}" in the workspace of agent "${agentId}" any more`);
    return { data: new Uint8Array(file.content), fileName: fileName ?? path.split('/').pop() ?? 'file' };
  };

  const consumer: Consumer = bus.queue.consume(
    QueueNames.channelSend,
    async (job) => {
      if (!Value.Check(ChannelSendJob, job.data)) throw new UnrecoverableJobError(`malformed channel-send payload: ${JSON.stringify(job.data)}`);
      const started = Date.now();
      let outcome = 'ok';
      try {
        await deliver(job.data.messageId);
      } catch (err) {
        outcome = 'error';
        throw err;
      } finally {
        jobDuration.observe({ queue: QueueNames.channelSend, outcome }, (Date.now() - started) / 1000);
      }
    },
    {
      concurrency: opts.concurrency,
      onFailed: (job, err, willRetry) => logger.warn({ jobId: job.id, err: err.message, willRetry }, 'channel-send job failed'),
    },
  );

  let lastPrune = 0;
  const sweep = async () => {
    const stranded = await listStrandedOutbound(db.db, opts.sweepGraceMs);
    for (const s of stranded) {
      await enqueueOutbound(bus.queue, s.id, { attempt: 10_000 + s.attempts });
    }
    if (stranded.length > 0) logger.info({ count: stranded.length }, 'stranded outbound messages enqueued again');
    if (Date.now() - lastPrune > 3600_000) {
      lastPrune = Date.now();
      const pruned = await pruneInboundEvents(db.db, opts.inboundRetentionMs);
      if (pruned > 0) logger.info({ pruned }, 'old inbound event ids pruned');
    }
  };
  let sweeping: Promise<void> | undefined;
  const timer = setInterval(() => {
    sweeping ??= sweep()
      .catch((err: unknown) => logger.warn({ err }, 'outbound sweep failed'))
      .finally(() => (sweeping = undefined));
  }, opts.sweepMs);
  timer.unref();

  runtime.lifecycle.add('channel-connector', async (remainingMs) => {
    clearInterval(timer);
    await sweeping;
    await consumer.close(Math.max(0, remainingMs - 500));
    logger.info('channel-connector stopped');
  });
  runtime.health.register('channel-connector', async () => {
    if (runtime.lifecycle.stopping) throw new Error('stopping');
  });
  logger.info({ bus: bus.kind, database: db.dialect, concurrency: opts.concurrency }, 'channel-connector started');
}

/** The file to send is gone: not retryable. */
class MediaError extends Error {}
