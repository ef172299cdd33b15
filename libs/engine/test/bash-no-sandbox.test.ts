import type * as childProcess from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { insertRuleChain, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { ToolError, builtinTools, bwrapUnavailable, type ToolContext } from '../src/index.js';

/**
 * Issue 35, finding 1 and part E: on a host without bubblewrap, `sandbox: auto` (the default) ran
 * a plain user's command on the host, as root, next to `secret.key`. Here bwrap is missing
 * whatever the host has (its spawn finds no program), so the refusal is tested on every machine;
 * tools.test.ts covers a host where bwrap works. What ran is asserted by a marker file the
 * command would create outside its workspace.
 */
vi.mock('node:child_process', async (importOriginal) => {
  const real = await importOriginal<typeof childProcess>();
  const spawn = ((file: string, ...rest: unknown[]) =>
    (real.spawn as (...a: unknown[]) => unknown)(file === 'bwrap' ? '/nonexistent/agentry-test/bwrap' : file, ...rest)) as typeof real.spawn;
  return { ...real, spawn };
});

const logger = pino({ level: 'silent' });
let handle: DbHandle;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-no-bwrap-'));

beforeAll(async () => {
  handle = await createTestPglite();
  await insertRuleChain(handle.db, { id: 'nb_agent', kind: 'agent', agentId: null, name: 'nb', category: 'agents', dsl: { ruleChain: { id: 'nb_agent', name: 'nb' } } });
}, 120_000);
afterAll(async () => {
  await handle?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ctx = (extra: Partial<ToolContext> = {}, config: Record<string, unknown> = {}): ToolContext => ({
  db: handle.db,
  agentId: 'nb_agent',
  runId: 'run_nb',
  sessionId: null,
  signal: new AbortController().signal,
  logger,
  config,
  ...extra,
});

describe('bash on a host without bubblewrap (issue 35, finding 1: fail closed)', () => {
  it('the probe reports bwrap missing', async () => {
    expect(await bwrapUnavailable()).toMatch(/bwrap is not installed/);
  });

  it('sandbox: auto (the default) refuses the command, naming the fix, and nothing runs', async () => {
    const marker = path.join(dir, 'ran-auto');
    const err = await builtinTools['bash']!.run({ command: `touch ${marker}` }, ctx()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ToolError);
    expect((err as Error).message).toMatch(/refused: no working sandbox .*install bubblewrap \(bwrap\), or an admin sets security\.allowUnsandboxedBash: true/);
    expect(fs.existsSync(marker)).toBe(false);
    // Written out as auto, or as bwrap: refused all the same.
    await expect(builtinTools['bash']!.run({ command: `touch ${marker}` }, ctx({}, { sandbox: 'bwrap' }))).rejects.toThrow(/the sandbox is required/);
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('only security.allowUnsandboxedBash lets it run, unsandboxed and saying so', async () => {
    const marker = path.join(dir, 'ran-allowed');
    const out = JSON.parse(await builtinTools['bash']!.run({ command: `touch ${marker}` }, ctx({ allowUnsandboxedBash: true }))) as { sandboxed: boolean };
    expect(out.sandboxed).toBe(false);
    expect(fs.existsSync(marker)).toBe(true);
  });
});
