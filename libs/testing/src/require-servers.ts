import { describe, inject, it } from 'vitest';
import { assertNotFastTier, isFastTier } from './tiers.js';

/**
 * Integration suites call these instead of `describe`. Without the server the suite is
 * skipped with a loud reason, except under CI=true, where it fails: CI never skips silently.
 */
function guarded(kind: 'postgres' | 'redis' | 'both') {
  return (name: string, fn: () => void): void => {
    if (isFastTier()) {
      // Not a skip: a suite that needs servers was put in the fast tier by mistake.
      describe(name, () => {
        it('needs servers, which the fast tier does not have', () => {
          assertNotFastTier(`${name} (describeWith${kind === 'both' ? 'Servers' : kind === 'postgres' ? 'Postgres' : 'Redis'})`);
        });
      });
      return;
    }
    const s = inject('testServers');
    const missing: string[] = [];
    if ((kind === 'postgres' || kind === 'both') && !s.postgresUrl) missing.push(s.postgresReason || 'Postgres unavailable');
    if ((kind === 'redis' || kind === 'both') && !s.redisUrl) missing.push(s.redisReason || 'Redis unavailable');
    if (missing.length === 0) {
      describe(name, fn);
      return;
    }
    skipLoudly(name, missing.join('; '), fn);
  };
}

/**
 * A suite that cannot run here: skipped with a loud reason, except under CI=true, where it is
 * one failing test naming the reason.
 */
export function skipLoudly(name: string, reason: string, fn: () => void): void {
  if (process.env.CI === 'true') {
    describe(name, () => {
      it(`cannot run: ${reason}`, () => {
        throw new Error(`${name}: ${reason} (CI=true: a suite must not be skipped)`);
      });
    });
    return;
  }
  console.warn(`\n!!! SKIPPING "${name}": ${reason}\n`);
  describe.skip(name, fn);
}


export const describeWithPostgres = guarded('postgres');
/**
 * The Postgres half of a suite that also runs on PGlite (the harness runs the same tests on
 * both engines). The fast tier leaves this half to the full tier, which runs it as
 * `describeWithPostgres` does; everywhere else it is `describeWithPostgres`.
 */
export function describeAlsoOnPostgres(name: string, fn: () => void): void {
  if (isFastTier()) return;
  describeWithPostgres(name, fn);
}
export const describeWithRedis = guarded('redis');
export const describeWithServers = guarded('both');

export function postgresUrl(): string {
  assertNotFastTier('postgresUrl()');
  const url = inject('testServers').postgresUrl;
  if (!url) throw new Error('Postgres is not available');
  return url;
}

export function redisUrl(): string {
  assertNotFastTier('redisUrl()');
  const url = inject('testServers').redisUrl;
  if (!url) throw new Error('Redis is not available');
  return url;
}
