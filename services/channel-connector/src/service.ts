import { QueueNames } from '@agentry/contracts';
import type { Consumer } from '@agentry/bus';
import { ADAPTERS, MemoryTokenCache, mediaDirOf, type AdapterIo } from '@agentry/channels';
import { registerQueueDepth, serviceMetrics, type Runtime } from '@agentry/runtime';
import { DEFAULT_CONNECTOR_OPTIONS, type ConnectorOptions } from './options.js';
import { OutboundSweeper } from './outbound-sweep.js';
import { sendJobHandler } from './send-job.js';

export { DEFAULT_CONNECTOR_OPTIONS, type ConnectorOptions } from './options.js';

/**
 * Sends outbound messages: consumes `channel-send {v:1, messageId}`, claims the message row,
 * sends it through its account's adapter (long texts split at the platform's limit, resuming
 * after the parts already sent), and records the outcome. Retryable failures (5xx, 429, network)
 * are tried again with exponential backoff or after the platform's Retry-After, each try a new
 * delayed job; 4xx and bad accounts fail at once. A sweep re-enqueues messages whose job was
 * lost (queue outage, crash between commit and enqueue), so every committed message ends sent
 * or failed. Delivery is at least once: a connector killed after the platform accepted a message
 * but before the row was updated sends it again when its claim lapses.
 *
 * This file wires the named parts: the send job (send-job.ts: claim, send, record), the retry
 * policy (retry-policy.ts: which failures are tried again, and when), the media a message sends
 * (media.ts) and the sweep (outbound-sweep.ts: lost jobs enqueued again, old inbound ids pruned).
 */
export async function startChannelConnector(runtime: Runtime, overrides: Partial<ConnectorOptions> = {}): Promise<void> {
  const opts: ConnectorOptions = { ...DEFAULT_CONNECTOR_OPTIONS, ...overrides };
  const { db, bus, logger } = runtime;
  const io: AdapterIo = { fetch: opts.fetch, tokens: new MemoryTokenCache(), now: Date.now, timeoutMs: opts.requestTimeoutMs };
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));

  const sends = serviceMetrics.channelSends(runtime.metrics);
  // Every platform's series exist from the start at 0: a rate (and the AgentryChannelSendsFailing
  // alert) sees even the first failure after a restart, which a series born at 1 would hide.
  for (const platform of Object.keys(ADAPTERS)) for (const status of ['sent', 'failed']) sends.inc({ platform, status }, 0);
  const handleSend = sendJobHandler({
    db: db.db,
    bus,
    logger,
    secrets: runtime.secrets,
    io,
    mediaDir: mediaDirOf(runtime.loaded.paths.rootDir),
    policy: opts,
    claimMs: opts.claimMs,
    metrics: {
      sends,
      retries: serviceMetrics.channelRetries(runtime.metrics),
      jobDuration: serviceMetrics.jobDuration(runtime.metrics),
    },
  });
  const consumer: Consumer = bus.queue.consume(QueueNames.channelSend, handleSend, {
    concurrency: opts.concurrency,
    onFailed: (job, err, willRetry) => logger.warn({ jobId: job.id, err: err.message, willRetry }, 'channel-send job failed'),
  });

  const sweeper = new OutboundSweeper({
    db: db.db,
    queue: bus.queue,
    logger,
    metrics: runtime.metrics,
    sweepMs: opts.sweepMs,
    sweepGraceMs: opts.sweepGraceMs,
  });
  sweeper.start();

  runtime.lifecycle.add('channel-connector', async (remainingMs) => {
    await sweeper.stop();
    await consumer.close(Math.max(0, remainingMs - 500));
    logger.info('channel-connector stopped');
  });
  runtime.health.register('channel-connector', async () => {
    if (runtime.lifecycle.stopping) throw new Error('stopping');
  });
  logger.info({ bus: bus.kind, database: db.dialect, concurrency: opts.concurrency }, 'channel-connector started');
}
