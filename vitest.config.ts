import { defineConfig } from 'vitest/config';
import { defaultServerConditions } from 'vite';

// Workspace packages export their TypeScript sources under the `@agentry/source` condition,
// so tests run against src/ without a build step.
// Without `module`: vitest hands these conditions to Node for the packages it leaves external, and
// Node in production never uses `module` (@opentelemetry/api's `module` build has extensionless
// imports that only a bundler resolves), so tests load what production loads.
const conditions = ['@agentry/source', ...defaultServerConditions.filter((c) => c !== 'module')];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: ['libs/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'e2e/**/*.test.ts'],
    globalSetup: ['libs/testing/src/global-setup.ts'],
    reporters: ['default', './libs/testing/src/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
