import type { TestProject } from 'vitest/node';
import { resolveTestServers, type TestServers } from './servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    testServers: TestServers;
  }
}

/**
 * Finds the real Postgres and Redis once per test run (env URLs, then the loopback defaults,
 * then testcontainers on Docker hosts) and hands their URLs to every test file.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { servers, stop } = await resolveTestServers();
  project.provide('testServers', servers);
  return stop;
}
