import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * The metrics the services record, defined once (names, help, labels, buckets) so that every
 * service and docs/operations.md agree. Each getter creates its metric on first use and returns
 * the same object afterwards, per registry: the four services of embedded mode share one
 * registry, and tests build several apps on one.
 */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
}

function histogram<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[], buckets = LATENCY_BUCKETS): Histogram<L> {
  return (registry.getSingleMetric(name) as Histogram<L> | undefined) ?? new Histogram({ name, help, labelNames, buckets, registers: [registry] });
}

export const serviceMetrics = {
  /** Chat streams a gateway holds open. */
  activeStreams: (r: Registry) =>
    (r.getSingleMetric('agentry_chat_active_streams') as Gauge | undefined) ??
    new Gauge({ name: 'agentry_chat_active_streams', help: 'SSE chat streams open on this gateway', registers: [r] }),
  /** Runs that ended, by outcome and by who asked (api, cron, a platform). */
  runs: (r: Registry) => counter(r, 'agentry_runs_total', 'runs ended, by status and source', ['status', 'source'] as const),
  /** Time from a run's start on a worker to its first answer token. */
  runTtft: (r: Registry) => histogram(r, 'agentry_run_ttft_seconds', 'time from run start to the first answer token', ['source'] as const),
  /** Whole run duration on the worker. */
  runDuration: (r: Registry) => histogram(r, 'agentry_run_duration_seconds', 'run duration on the worker, by status', ['status'] as const),
  /** One model call (a step of the tool loop), by the provider asked and its outcome. */
  providerCalls: (r: Registry) => counter(r, 'agentry_provider_calls_total', 'model calls, by provider and outcome (ok, error)', ['provider', 'outcome'] as const),
  /** Tokens a model call used, by the run's agent, the provider that answered, and kind (prompt, completion). */
  tokens: (r: Registry) => counter(r, 'agentry_tokens_total', 'model tokens used, by agent, provider and kind (prompt, completion)', ['agent', 'provider', 'kind'] as const),
  providerTtft: (r: Registry) => histogram(r, 'agentry_provider_ttft_seconds', 'model call time to first event, by provider', ['provider'] as const),
  /** Job handling time per queue (agent-run, channel-send, cron-fire). */
  jobDuration: (r: Registry) => histogram(r, 'agentry_job_duration_seconds', 'job handling time, by queue and outcome', ['queue', 'outcome'] as const),
  cronFires: (r: Registry) => counter(r, 'agentry_cron_fires_total', 'cron fires, by outcome (started, duplicate, skipped, failed)', ['outcome'] as const),
  channelSends: (r: Registry) => counter(r, 'agentry_channel_sends_total', 'outbound channel messages ended, by platform and status', ['platform', 'status'] as const),
  channelRetries: (r: Registry) => counter(r, 'agentry_channel_send_retries_total', 'outbound sends retried, by platform', ['platform'] as const),
  /** Periodic passes (sweeps, retention, reloads; libs/runtime periodic.ts), by pass and outcome (ok, failed, aborted). */
  periodicPasses: (r: Registry) => counter(r, 'agentry_periodic_passes_total', 'periodic passes, by pass and outcome', ['pass', 'outcome'] as const),
  periodicPassDuration: (r: Registry) => histogram(r, 'agentry_periodic_pass_duration_seconds', 'periodic pass duration, by pass', ['pass'] as const),
  inboundEvents: (r: Registry) => counter(r, 'agentry_inbound_events_total', 'inbound platform events, by platform and outcome', ['platform', 'outcome'] as const),
};

/**
 * Queue depth as a gauge read at scrape time (`agentry_queue_jobs{queue,state}`), so no timer
 * polls Redis between scrapes. Registered once per registry.
 */
export function registerQueueDepth<Q extends string>(r: Registry, queues: readonly Q[], counts: (queue: Q) => Promise<Record<string, number>>): void {
  if (r.getSingleMetric('agentry_queue_jobs')) return;
  new Gauge({
    name: 'agentry_queue_jobs',
    help: 'jobs per queue and state (waiting, active, delayed, failed)',
    labelNames: ['queue', 'state'] as const,
    registers: [r],
    async collect() {
      this.reset();
      for (const queue of queues) {
        try {
          const c = await counts(queue);
          for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) this.set({ queue, state }, c[state] ?? 0);
        } catch {
          // A scrape during a Redis outage shows no depth rather than failing the whole scrape.
        }
      }
    },
  });
}
