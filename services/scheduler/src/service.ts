import { PubSubChannels, QueueNames } from '@agentry/contracts';
import { registerQueueDepth, serviceMetrics, startPeriodic, type Runtime } from '@agentry/runtime';
import { Firer } from './fire.js';
import { Reconciler } from './reconcile.js';
import { retentionPass } from './retention.js';

export interface SchedulerOptions {
  /** Full reconcile of the table against the bus's schedulers (default 60 s). */
  reconcileMs?: number;
  /** Settling of fires whose run ended without completing them, vanished or ran too long (default 10 s). */
  sweepMs?: number;
  /** How long a fire's run may take before the sweep fails the fire and cancels the run (default 10 min). */
  runTimeoutMs?: number;
  /** Fires handled at once by this process (default 10); a fire only creates and enqueues a run. */
  concurrency?: number;
  /** Delay of the first retention pass after start (default 60 s; then every `retention.sweep_minutes`). */
  retentionDelayMs?: number;
}

/** Coalesces the full reconciles that agent changes trigger (a deleted agent takes its jobs along). */
const AGENT_CHANGE_DEBOUNCE_MS = 500;

/**
 * Keeps the cron scheduler in step with the `cron_jobs` table and turns fires into runs.
 * In step: every change announced on `invalidate` (`{area: 'cron', id}` reconciles that job,
 * `{area: 'agents'}` everything), plus a full reconcile at start and every `reconcileMs`, so a
 * lost message heals. Fires: see Firer. Any number of replicas may run; each tick fires once.
 */
export async function startScheduler(runtime: Runtime, opts: SchedulerOptions = {}): Promise<void> {
  const { db, bus } = runtime;
  const logger = runtime.logger.child({ component: 'scheduler' });
  const reconcileMs = opts.reconcileMs ?? 60_000;
  const sweepMs = opts.sweepMs ?? 10_000;
  const runTimeoutMs = opts.runTimeoutMs ?? 600_000;
  const reconciler = new Reconciler(db.db, bus.scheduler, logger);
  const fires = serviceMetrics.cronFires(runtime.metrics);
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));
  const firer = new Firer(db.db, bus, reconciler, logger, { runTimeoutMs, count: (outcome) => fires.inc({ outcome }) });
  let stopped = false;

  let agentTimer: NodeJS.Timeout | undefined;
  const reconcileAll = (why: string) =>
    reconciler.all().catch((err: unknown) => logger.error({ err, why }, 'cron reconcile failed'));

  // Subscribed before the first reconcile, so that no change made meanwhile is missed.
  const unsubscribe = await bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => {
    if (stopped) return;
    if (m.area === 'cron') {
      if (m.id) void reconciler.one(m.id).catch((err: unknown) => logger.error({ err, cronJobId: m.id }, 'cron reconcile failed'));
      else void reconcileAll('cron changed');
    } else if (m.area === 'agents') {
      clearTimeout(agentTimer);
      agentTimer = setTimeout(() => void reconcileAll('agents changed'), AGENT_CHANGE_DEBOUNCE_MS);
    }
  });

  await reconciler.all();
  const consumer = bus.scheduler.consume<unknown>((fire) => firer.fire(fire), { concurrency: opts.concurrency ?? 10 });

  const periodic = { logger, metrics: runtime.metrics };
  const sweep = startPeriodic({ name: 'cron-sweep', everyMs: () => sweepMs, firstDelayMs: 0, ...periodic, pass: () => firer.sweep() });
  const reconcile = startPeriodic({ name: 'cron-reconcile', everyMs: () => reconcileMs, ...periodic, pass: async () => void (await reconciler.all()) });

  // The interval is read after each pass, so a changed retention.sweep_minutes applies at the next.
  const retention = startPeriodic({
    name: 'retention',
    everyMs: () => runtime.config.current.retention.sweep_minutes * 60_000,
    firstDelayMs: opts.retentionDelayMs ?? 60_000,
    logger,
    metrics: runtime.metrics,
    pass: () => retentionPass(db.db, runtime.config.current.retention),
  });

  runtime.lifecycle.add('scheduler', async (remainingMs) => {
    stopped = true;
    await Promise.all([sweep.stop(), reconcile.stop()]);
    clearTimeout(agentTimer);
    await retention.stop();
    await unsubscribe().catch((err: unknown) => logger.warn({ err }, 'unsubscribe failed'));
    // Fires in hand finish (they only create and enqueue a run); the worker completes each
    // fire's record when its run ends, whether or not a scheduler is running.
    await consumer.close(Math.max(0, remainingMs - 500));
    logger.info('scheduler stopped');
  });
  runtime.health.register('scheduler', async () => {
    if (runtime.lifecycle.stopping) throw new Error('stopping');
  });
  logger.info({ bus: bus.kind, database: db.dialect, reconcileMs, sweepMs, runTimeoutMs }, 'scheduler started');
}
