import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { serviceMetrics } from './service-metrics.js';

/** What a pass reports: counts of what it did, logged at info when any is non-zero. */
export type PassResult = Record<string, number> | void;

export interface PeriodicOptions {
  /** Names the pass in logs and in `agentry_periodic_pass_*{pass}`. */
  name: string;
  /** Time between the end of one pass and the start of the next, read after each pass (so a changed setting applies); 0 or less: off, looked at again each second. */
  everyMs: () => number;
  /** Delay of the first pass (default: `everyMs()`). */
  firstDelayMs?: number;
  /** Each wait is stretched by up to this fraction at random (default 0.1), so replicas started together do not pass in step. */
  jitter?: number;
  /** A pass still going after this long is aborted through its signal and logged (default: 5 minutes). */
  deadlineMs?: () => number;
  logger: Logger;
  metrics?: Registry;
  /** One pass. It must stop soon after its signal aborts. */
  pass: (signal: AbortSignal) => Promise<PassResult>;
}

export interface PeriodicPass {
  /** Runs a pass now (or waits for the one under way), outside the timer. */
  runNow(): Promise<void>;
  /** Stops the timer, aborts a pass under way and waits for it to end. */
  stop(): Promise<void>;
}

const DEFAULT_DEADLINE_MS = 5 * 60_000;

/**
 * Every periodic pass of the services (sweeps, retention, reloads) goes through here, so that
 * all of them have one timer style: never two passes of one kind at once in a process, a wait
 * measured from the end of the last pass, jitter, a deadline, a metric and a log line per pass
 * (debug when it did nothing, info when it did something, warn when it failed). A pass that
 * fails is tried again at the next tick; the failure never escapes.
 */
export function startPeriodic(opts: PeriodicOptions): PeriodicPass {
  const jitter = opts.jitter ?? 0.1;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let current: AbortController | undefined;
  let stopped = false;

  const metrics = opts.metrics
    ? { passes: serviceMetrics.periodicPasses(opts.metrics), duration: serviceMetrics.periodicPassDuration(opts.metrics) }
    : undefined;

  const once = (): Promise<void> => {
    running ??= (async () => {
      const ctl = new AbortController();
      current = ctl;
      const deadline = opts.deadlineMs?.() ?? DEFAULT_DEADLINE_MS;
      const overdue = setTimeout(() => ctl.abort(new Error(`${opts.name}: the pass took longer than ${deadline} ms`)), deadline);
      overdue.unref();
      const started = performance.now();
      let outcome: 'ok' | 'failed' | 'aborted' = 'ok';
      try {
        const result = await opts.pass(ctl.signal);
        const ms = Math.round(performance.now() - started);
        const did = result && Object.values(result).some((n) => n > 0);
        if (did) opts.logger.info({ pass: opts.name, ...result, ms }, `${opts.name}: pass done`);
        else opts.logger.debug({ pass: opts.name, ...(result ?? {}), ms }, `${opts.name}: pass done, nothing to do`);
      } catch (err) {
        outcome = ctl.signal.aborted ? 'aborted' : 'failed';
        const why = ctl.signal.aborted && !stopped ? (ctl.signal.reason as Error).message : (err as Error).message;
        if (stopped) opts.logger.debug({ pass: opts.name, err: why }, `${opts.name}: pass stopped by shutdown`);
        else opts.logger.warn({ pass: opts.name, err: why }, `${opts.name}: pass failed; the next one tries again`);
      } finally {
        clearTimeout(overdue);
        current = undefined;
        metrics?.passes.inc({ pass: opts.name, outcome });
        metrics?.duration.observe({ pass: opts.name }, (performance.now() - started) / 1000);
      }
    })().finally(() => (running = undefined));
    return running;
  };

  const schedule = (delayMs: number): void => {
    if (stopped) return;
    const off = opts.everyMs() <= 0;
    const wait = off ? 1000 : Math.round(Math.max(0, delayMs) * (1 + Math.random() * jitter));
    timer = setTimeout(() => {
      if (opts.everyMs() <= 0) return schedule(0);
      void once().finally(() => schedule(opts.everyMs()));
    }, wait);
    timer.unref();
  };
  schedule(opts.firstDelayMs ?? opts.everyMs());

  return {
    runNow: once,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      current?.abort(new Error(`${opts.name}: stopped`));
      await running;
    },
  };
}
