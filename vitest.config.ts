import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { defaultServerConditions } from 'vite';
import { LongestFirstSequencer } from './libs/testing/src/sequencer.ts';
import { fastTierFiles, sharedModuleFiles, TIER_ENV } from './libs/testing/src/tiers.ts';

// Workspace packages export their TypeScript sources under the `@agentry/source` condition,
// so tests run against src/ without a build step.
// Without `module`: vitest hands these conditions to Node for the packages it leaves external, and
// Node in production never uses `module` (@opentelemetry/api's `module` build has extensionless
// imports that only a bundler resolves), so tests load what production loads.
const conditions = ['@agentry/source', ...defaultServerConditions.filter((c) => c !== 'module')];

const root = path.dirname(fileURLToPath(import.meta.url));
const everything = ['libs/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'e2e/**/*.test.ts'];

// `vitest run` is the full suite; `vitest run --mode fast` (npm run test:fast) the fast tier:
// the files libs/testing/src/tiers.ts finds need no servers, browser, image or spawned services.
// The fast tier finds no servers on purpose (global set-up not run), so that a server helper
// used there by mistake fails instead of quietly working.
export default defineConfig(({ mode }) => {
  const fast = mode === 'fast';
  // The fast tier's files that mock nothing share one module cache per worker (project `shared`,
  // vitest `isolate: false`), in both tiers: each otherwise spends about as long importing the
  // engine, the gateway and their dependencies afresh as running its tests (docs/conventions.md,
  // tiers). The rest (`isolated`: e2e, servers, processes, mocks) each get fresh modules.
  const shared = sharedModuleFiles(root);
  return {
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: conditions } },
    test: {
      ...(fast
        ? {
            env: { [TIER_ENV]: 'fast' },
            provide: {
              testServers: { postgresUrl: null, postgresReason: 'the fast tier runs without servers', redisUrl: null, redisReason: 'the fast tier runs without servers' },
            },
          }
        : { globalSetup: ['libs/testing/src/global-setup.ts'] }),
      reporters: ['default', './libs/testing/src/summary-reporter.ts'],
      testTimeout: 30_000,
      hookTimeout: 60_000,
      // Long files first, so that no long file starts last and runs alone (see the sequencer).
      sequence: { sequencer: LongestFirstSequencer },
      pool: 'forks',
      maxWorkers: 2,
      projects: [
        { extends: true, test: { name: 'shared', include: shared, isolate: false } },
        { extends: true, test: { name: 'isolated', include: fast ? fastTierFiles(root) : everything, exclude: [...shared, '**/node_modules/**'] } },
      ],
    },
  };
});
