import { bootstrap, runMain } from '@agentry/runtime';
import { webBuildDir } from '@agentry/web';
import { startStandalone } from './standalone.js';

await runMain('standalone', async () => {
  const runtime = await bootstrap({ service: 'standalone', mode: 'embedded', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startStandalone(runtime, { uiDir: webBuildDir });
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
