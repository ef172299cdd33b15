import { bootstrap, runMain } from '@agentry/runtime';
import { startGateway } from './service.js';

await runMain('gateway', async () => {
  const runtime = await bootstrap({ service: 'gateway', mode: 'cluster', argv: process.argv.slice(2), env: process.env, cwd: process.cwd() });
  await startGateway(runtime);
  runtime.health.markStarted();
  return runtime;
}, { debug: Boolean(process.env.AGENTRY_DEBUG) });
