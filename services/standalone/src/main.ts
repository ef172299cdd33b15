import { bootstrap, runMain, startTracing } from '@agentry/runtime';
import { webBuildDir } from '@agentry/web';
import { startStandalone } from './standalone.js';

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('standalone', process.env);

await runMain('standalone', async () => {
  const runtime = await bootstrap({ service: 'standalone', mode: 'embedded', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startStandalone(runtime, { uiDir: webBuildDir });
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
