import { bootstrap, runMain, serveProbes, startTracing } from '@agentry/runtime';
import { startScheduler } from './service.js';

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('scheduler', process.env);

/** Optional tuning from the environment (milliseconds); unset or invalid: the defaults. */
function ms(name: string): number | undefined {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

await runMain('scheduler', async () => {
  const runtime = await bootstrap({ service: 'scheduler', mode: 'cluster', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startScheduler(runtime, {
    reconcileMs: ms('CRON_RECONCILE_MS'),
    sweepMs: ms('CRON_SWEEP_MS'),
    runTimeoutMs: ms('CRON_RUN_TIMEOUT_MS'),
  });
  // Probes bind all interfaces by default so that an orchestrator can reach them.
  await serveProbes(runtime, { host: process.env.HEALTH_HOST || '0.0.0.0', port: Number(process.env.HEALTH_PORT ?? 9602) });
  runtime.health.markStarted();
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
