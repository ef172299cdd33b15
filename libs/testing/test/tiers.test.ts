import { afterEach, describe, expect, it } from 'vitest';
import { assertNotFastTier, fastTierFiles, needsFullTier, needsOwnModules, repoRoot, sharedModuleFiles, spawnService, TIER_ENV } from '@agentry/testing';
import path from 'node:path';

const at = (file: string) => path.join(repoRoot, file);

describe('test tiers', () => {
  const before = process.env[TIER_ENV];
  afterEach(() => {
    if (before === undefined) delete process.env[TIER_ENV];
    else process.env[TIER_ENV] = before;
  });

  it('puts server, process and browser suites in the full tier, by their text or their harness', () => {
    expect(needsFullTier(at('libs/bus/test/redis.test.ts'))).toBe(true);
    expect(needsFullTier(at('services/cli/test/cli.test.ts'))).toBe(true); // through ./support.ts
    expect(needsFullTier(at('services/web/test/web-usage.test.ts'))).toBe(true);
    // Runs on PGlite and again on Postgres: the fast tier runs the PGlite half.
    expect(needsFullTier(at('services/gateway/test/agents.test.ts'))).toBe(false);
    expect(needsFullTier(at('libs/engine/test/engine.test.ts'))).toBe(false); // src/ imports child_process; not set-up
  });

  it('lists no e2e file and no full-tier file in the fast tier', () => {
    const fast = fastTierFiles(repoRoot);
    expect(fast).toContain('libs/engine/test/engine.test.ts');
    expect(fast.some((f) => f.startsWith('e2e/'))).toBe(false);
    expect(fast).not.toContain('libs/bus/test/redis.test.ts');
  });

  it('shares modules only among in-process files that mock nothing', () => {
    expect(needsOwnModules(at('libs/engine/test/mcp-policy.test.ts'))).toBe(true); // vi.mock('node:dns')
    expect(needsOwnModules(at('libs/engine/test/engine.test.ts'))).toBe(false);
    const shared = sharedModuleFiles(repoRoot);
    expect(shared).toContain('libs/engine/test/engine.test.ts');
    expect(shared).not.toContain('libs/engine/test/mcp-policy.test.ts');
    expect(shared).not.toContain('libs/bus/test/redis.test.ts');
    expect(shared.every((f) => fastTierFiles(repoRoot).includes(f))).toBe(true);
  });

  it('makes a server or process helper fail loudly in the fast tier', () => {
    process.env[TIER_ENV] = 'fast';
    expect(() => assertNotFastTier('x')).toThrow(/fast tier/);
    expect(() => spawnService('services/gateway/src/main.ts')).toThrow(/fast tier/);
    delete process.env[TIER_ENV];
    expect(() => assertNotFastTier('x')).not.toThrow();
  });
});
