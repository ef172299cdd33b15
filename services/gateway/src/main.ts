import { bootstrap, runMain, startTracing } from '@agentry/runtime';
// The one service->package exception: @agentry/web is an asset package (the built UI's path).
import { webBuildDir } from '@agentry/web';
import { startGateway } from './service.js';

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('gateway', process.env);

await runMain('gateway', async () => {
  const runtime = await bootstrap({ service: 'gateway', mode: 'cluster', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startGateway(runtime, { uiDir: webBuildDir });
  runtime.health.markStarted();
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
