import { bootstrap, runMain, startTracing } from '@agentry/runtime';
import { startupBanner } from '@agentry/gateway';
import { webBuildDir } from '@agentry/web';
import { startStandalone } from './standalone.js';

/**
 * The web UI's build that `npm start` (bin/start.mjs) runs beside this start; undefined when
 * started otherwise (the image, tests), where the build is already there or not wanted.
 */
const webUiBuild = (globalThis as Record<symbol, Promise<void> | undefined>)[Symbol.for('agentry.webUiBuild')];

// First: the SDK (when an OTLP endpoint is set) must be in place before the logger and routes exist.
await startTracing('standalone', process.env);

await runMain('standalone', async () => {
  const runtime = await bootstrap({ service: 'standalone', mode: 'embedded', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await webUiBuild;
  const { port } = await startStandalone(runtime, { uiDir: webBuildDir });
  // Serving: scripts/start.mjs may now make the bundle the next `npm start` runs (set only then).
  (globalThis as Record<symbol, (() => void) | undefined>)[Symbol.for('agentry.started')]?.();
  // A person at a terminal: where to go and how the door stands, then quiet (the log file keeps the rest).
  if (runtime.terminal) {
    runtime.terminal.print(`\n${(await startupBanner(runtime, port)).join('\n')}\n`);
    runtime.terminal.quiet();
  }
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
