import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@agentry/testing';
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

type ExecProtocolStream = (message: Uint8Array, options?: unknown) => Promise<unknown>;

/**
 * Counts the statements PGlite executes (each Execute message), with the SQL each ran, by
 * wrapping its protocol entry point for the duration of the file: the dialect sends every
 * statement there (libs/db/src/pglite-dialect.ts), named ones as a Bind of an earlier Parse.
 */
async function countPgliteStatements(): Promise<{ statements: string[]; restore: () => void }> {
  const { PGlite } = await import('@electric-sql/pglite');
  const proto = PGlite.prototype as unknown as { execProtocolStream: ExecProtocolStream };
  const own = Object.getOwnPropertyDescriptor(proto, 'execProtocolStream');
  const original = proto.execProtocolStream;
  const named = new Map<string, string>();
  const state = {
    statements: [] as string[],
    restore: () => {
      if (own) Object.defineProperty(proto, 'execProtocolStream', own);
      else delete (proto as Partial<typeof proto>).execProtocolStream;
    },
  };
  const cstring = (bytes: Uint8Array, at: number): [string, number] => {
    const end = bytes.indexOf(0, at);
    return [Buffer.from(bytes.subarray(at, end)).toString('utf8'), end + 1];
  };
  proto.execProtocolStream = function (this: unknown, message, options) {
    const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
    let current = '';
    for (let at = 0; at < message.length; ) {
      const type = String.fromCharCode(message[at]!);
      const length = view.getInt32(at + 1);
      const body = at + 5;
      if (type === 'P') {
        const [name, next] = cstring(message, body);
        [current] = cstring(message, next);
        if (name) named.set(name, current);
      } else if (type === 'B') {
        const [, next] = cstring(message, body);
        const [statement] = cstring(message, next);
        if (statement) current = named.get(statement) ?? `(statement ${statement})`;
      } else if (type === 'E') {
        state.statements.push(current.replace(/\s+/g, ' ').trim().slice(0, 90));
      }
      at += 1 + length;
    }
    return original.call(this, message, options);
  };
  return state;
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
