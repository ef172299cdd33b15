import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { defaultServerConditions } from 'vite';
import { LongestFirstSequencer } from './libs/testing/src/sequencer.ts';
import { fastTierFiles, TIER_ENV } from './libs/testing/src/tiers.ts';

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
export default defineConfig(({ mode }) => ({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: mode === 'fast' ? fastTierFiles(root) : everything,
    ...(mode === 'fast'
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
  },
}));
