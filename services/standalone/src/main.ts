import { bootstrap, runMain, startTracing } from '@agentry/runtime';
import { startupBanner } from '@agentry/gateway';
import { webBuildDir } from '@agentry/web';
import { startStandalone } from './standalone.js';

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('standalone', process.env);

await runMain('standalone', async () => {
  const runtime = await bootstrap({ service: 'standalone', mode: 'embedded', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  const { port } = await startStandalone(runtime, { uiDir: webBuildDir });
  // A person at a terminal: where to go and how the door stands, then quiet (the log file keeps the rest).
  if (runtime.terminal) {
    runtime.terminal.print(`\n${(await startupBanner(runtime, port)).join('\n')}\n`);
    runtime.terminal.quiet();
  }
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
