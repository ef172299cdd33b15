import { bootstrap, runMain, serveProbes, startTracing } from '@agentry/runtime';
import { startAgentWorker } from './service.js';

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('agent-worker', process.env);

await runMain('agent-worker', async () => {
  const runtime = await bootstrap({ service: 'agent-worker', mode: 'cluster', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startAgentWorker(runtime);
  // Probes bind all interfaces by default so that an orchestrator can reach them.
  await serveProbes(runtime, { host: process.env.HEALTH_HOST || '0.0.0.0', port: Number(process.env.HEALTH_PORT ?? 9601) });
  runtime.health.markStarted();
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
