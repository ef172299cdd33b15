import { startStandalone } from '@agentry/standalone';
import { authorityMatrix, coverageGuard } from './authority-matrix-suite.js';
import { bootEmbedded } from './harness.js';

/**
 * The run-time authority matrix in embedded mode (one process, PGlite, the in-process bus), every
 * case; the coverage guard that fails when a power has no matrix entry runs here too.
 * authority-matrix-suite.ts says what is enumerated and how each case is judged.
 */
coverageGuard();

authorityMatrix({
  start: async (configLines) => {
    const embedded = await bootEmbedded('authority-matrix', ['server: {host: 127.0.0.1, port: 0}', ...configLines], { service: 'standalone' });
    const { port } = await startStandalone(embedded.runtime);
    return { baseURL: `http://127.0.0.1:${port}/api/v1`, stop: () => embedded.stop() };
  },
});
