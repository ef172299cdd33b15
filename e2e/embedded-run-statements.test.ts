import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracePgliteStatements, waitFor } from '@agentry/testing';
import { agentDsl, inProcessStack } from './harness.js';

/**
 * Issue 39's statements per embedded chat run (docs/benchmarks.md, "Issue 39: embedded mode, the
 * claim folded into the insert"): every statement PGlite executes for one non-streamed chat
 * outside a session, through the whole stack (the gateway's route, the in-process queue, the
 * worker, the usage row), counted where they enter PGlite's backend, never timed. On PGlite a
 * statement is ~0.3 ms of the process's CPU, a tenth of a run.
 */
const BUDGET = {
  /** The run's insert (claimed by it), its finish, and its usage row. */
  statements: 3,
};

/** Every statement PGlite executes while the file runs, with its SQL (tracePgliteStatements). */
async function countPgliteStatements(): Promise<{ statements: string[]; restore: () => void }> {
  const { PGlite } = await import('@electric-sql/pglite');
  const statements: string[] = [];
  const restore = tracePgliteStatements(PGlite, (sql) => statements.push(sql.slice(0, 90)));
  return { statements, restore };
}

describe("issue 39's statements per embedded chat run (counted where they enter PGlite, never timed)", () => {
  let counter: Awaited<ReturnType<typeof countPgliteStatements>>;
  const stack = inProcessStack({ name: 'run-statements', users: { admin: 'admin-pass-word-1' } });
  const chat = (content: string) => stack.call('POST', '/chat/completions', stack.tokens.admin, { model: 'counted', messages: [{ role: 'user', content }] });

  beforeAll(async () => {
    counter = await countPgliteStatements();
    await stack.create(stack.tokens.admin, agentDsl('counted'));
  });
  afterAll(() => counter?.restore());

  it(`a non-streamed chat outside a session: at most ${BUDGET.statements} statements, none of them a claim`, async () => {
    // Warm: the key, the agent and the owner are read once per process, not per run.
    expect((await chat('warm up')).statusCode).toBe(200);
    const usageWritten = () => counter.statements.some((s) => s.startsWith('insert into "run_usage"'));
    await waitFor(async () => usageWritten(), 5_000, 10);
    counter.statements.length = 0;
    const res = await chat('counted');
    expect(res.statusCode, res.body).toBe(200);
    // The usage row is written off the run's path, up to 25 ms after it (with others under load).
    await waitFor(async () => usageWritten(), 5_000, 10);
    const list = counter.statements.join('\n');
    expect(counter.statements.length, list).toBeLessThanOrEqual(BUDGET.statements);
    expect(counter.statements.filter((s) => s.startsWith('insert into "runs"')), list).toHaveLength(1);
    expect(counter.statements.some((s) => /^update "runs" set "status" = 'running'|^with claimed as/.test(s)), list).toBe(false);
  });
});
