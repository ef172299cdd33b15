import type { TestProject } from 'vitest/node';
import { resolveTestServers, type TestServers } from './servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    testServers: TestServers;
  }
}

interface Shared {
  resolved: ReturnType<typeof resolveTestServers>;
  users: number;
}

// Every vitest project (vitest.config.ts: `shared`, `isolated`) runs the global set-up, each
// through its own module runner: the servers found (or containers started) live on the process, so
// that a run finds them once and stops them after the last project.
const KEY = Symbol.for('agentry.testing.testServers');
const holder = globalThis as typeof globalThis & { [KEY]?: Shared };

/**
 * Finds the real Postgres and Redis once per test run (env URLs, then the loopback defaults,
 * then testcontainers on Docker hosts) and hands their URLs to every test file.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const shared = (holder[KEY] ??= { resolved: resolveTestServers(), users: 0 });
  shared.users++;
  const { servers, stop } = await shared.resolved;
  project.provide('testServers', servers);
  return async () => {
    if (--shared.users > 0) return;
    delete holder[KEY];
    await stop();
  };
}
