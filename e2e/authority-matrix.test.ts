import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { authorityMatrix, coverageGuard } from './authority-matrix-suite.js';

/**
 * The run-time authority matrix in embedded mode (one process, PGlite, the in-process bus), every
 * case; the coverage guard that fails when a power has no matrix entry runs here too.
 * authority-matrix-suite.ts says what is enumerated and how each case is judged.
 */
coverageGuard();

authorityMatrix({
  start: async (configLines) => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-matrix-rt-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), ['server: {host: 127.0.0.1, port: 0}', ...configLines].join('\n'));
    const runtime = await bootstrap({
      service: 'standalone',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'authority-matrix-master-key-0123456789' },
      cwd,
      logDestination: { write: () => {} },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    const { port } = await startStandalone(runtime);
    return {
      baseURL: `http://127.0.0.1:${port}/api/v1`,
      stop: async () => {
        await runtime.lifecycle.shutdown('test');
        fs.rmSync(cwd, { recursive: true, force: true });
      },
    };
  },
});
