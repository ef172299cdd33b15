import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScriptError, ScriptSandbox, type ScriptInput } from '../src/index.js';

/**
 * The script sandbox: QuickJS in worker threads. Elapsed times are checked only loosely (the
 * sandbox must stop a script, not stop it fast); measured numbers belong in the report/bench.
 */

const input: ScriptInput = { msg: { temperature: 60, name: 'probe' }, metadata: { room: 'a1' }, msgType: 'TELEMETRY' };

let sandbox: ScriptSandbox;
beforeAll(async () => {
  sandbox = new ScriptSandbox({ workers: 2, timeoutMs: 1000 });
  await sandbox.warmUp();
});
afterAll(() => sandbox.close());

async function failure(p: Promise<unknown>): Promise<ScriptError> {
  const err = await p.then(
    (v) => {
      throw new Error(`expected a failure, got ${JSON.stringify(v)}`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ScriptError);
  return err as ScriptError;
}

describe('ScriptSandbox: results', () => {
  it('calls the body with msg, metadata and msgType and returns its JSON result', async () => {
    expect(await sandbox.run('return msg.temperature > 50;', input)).toBe(true);
    expect(await sandbox.run('return {msg: msg.name, metadata: metadata, msgType: msgType + "!"};', input)).toEqual({
      msg: 'probe',
      metadata: { room: 'a1' },
      msgType: 'TELEMETRY!',
    });
    expect(await sandbox.run("return ['a', 'b'];", input)).toEqual(['a', 'b']);
    expect(await sandbox.run('var x = 1;', input)).toBeUndefined();
    expect(await sandbox.run('return function () {};', input)).toBeUndefined();
  });

  it("passes RuleGo's fourth parameter dataType (undefined when the input has none)", async () => {
    expect(await sandbox.run('return dataType;', { ...input, dataType: 'TEXT' })).toBe('TEXT');
    expect(await sandbox.run('return typeof dataType;', input)).toBe('undefined');
  });

  it('keeps nothing between evaluations', async () => {
    expect(await sandbox.run('globalThis.leak = 42; Object.prototype.polluted = 1; return leak;', input)).toBe(42);
    for (let i = 0; i < 4; i++) {
      expect(await sandbox.run('return [typeof leak, typeof ({}).polluted];', input)).toEqual(['undefined', 'undefined']);
    }
  });

  it('runs many evaluations concurrently on the pool', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => sandbox.run('return msg.n * 2;', { ...input, msg: { n: i } })),
    );
    expect(results).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
  });
});

describe('ScriptSandbox: no host access', () => {
  it('has no process, require, fetch, timers or console', async () => {
    const kinds = await sandbox.run(
      'return [typeof process, typeof require, typeof fetch, typeof globalThis.process, typeof module, typeof setTimeout, typeof console, typeof WebAssembly];',
      input,
    );
    expect(kinds).toEqual(Array(8).fill('undefined'));
  });

  it('reports attempts to reach them as errors', async () => {
    expect((await failure(sandbox.run('return process.env;', input))).message).toBe("ReferenceError: 'process' is not defined (line 1)");
    expect((await failure(sandbox.run("return require('node:fs').readFileSync('/etc/passwd', 'utf8');", input))).message).toMatch(
      /ReferenceError: 'require' is not defined/,
    );
    expect((await failure(sandbox.run("return fetch('http://127.0.0.1/');", input))).message).toMatch(/ReferenceError: 'fetch' is not defined/);
    // The Function constructor reaches QuickJS's own global, not the host's.
    expect((await failure(sandbox.run("return globalThis.constructor.constructor('return process')().env;", input))).message).toMatch(
      /'process' is not defined/,
    );
  });
});

describe('ScriptSandbox: errors', () => {
  it('reports a syntax error with its line', async () => {
    const err = await failure(sandbox.run('var a = 1;\nvar b = ;\nreturn a;', input));
    expect(err.kind).toBe('syntax');
    expect(err.line).toBe(2);
    expect(err.message).toMatch(/^SyntaxError: .* \(line 2\)$/);
  });

  it('reports a thrown error with the line of the throw', async () => {
    const err = await failure(sandbox.run("var a = 1;\n\nthrow new TypeError('bad value ' + a);", input));
    expect(err).toMatchObject({ kind: 'runtime', line: 3, message: 'TypeError: bad value 1 (line 3)' });
    expect((await failure(sandbox.run("throw 'plain';", input))).message).toBe('Error: uncaught "plain"');
  });

  it('stops deep recursion as a stack overflow', async () => {
    const err = await failure(sandbox.run('function f(n) { return f(n + 1) + 1; }\nreturn f(0);', input));
    expect(err.message).toMatch(/InternalError: stack overflow/);
  });
});

describe('ScriptSandbox: limits', () => {
  it('stops an infinite loop at the deadline', async () => {
    const started = performance.now();
    const err = await failure(sandbox.run('while (true) {}', input, { timeoutMs: 300 }));
    const ms = performance.now() - started;
    expect(err.kind).toBe('timeout');
    expect(err.message).toMatch(/^script timed out after 300 ms/);
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(5000);
  });

  it('stops a string memory bomb, and the pool serves the next call', async () => {
    // A long deadline, so that the memory cap is what stops it (QuickJS alone does not count strings).
    const err = await failure(sandbox.run("var s = ''; while (true) { s += 'x'.repeat(1e6); }", input, { timeoutMs: 10_000 }));
    expect(err.kind).toBe('memory');
    expect(await sandbox.run('return 1 + 1;', input)).toBe(2);
  });

  it('stops an object memory bomb', async () => {
    const err = await failure(sandbox.run('var a = []; while (true) { a.push({ n: a.length, s: [1, 2, 3] }); }', input, { timeoutMs: 10_000 }));
    expect(err.kind).toBe('memory');
    expect(err.message).toBe('script ran out of memory (limit 32 MiB)');
  });

  it('terminates a worker that overshoots the deadline and replaces it', async () => {
    const before = sandbox.stats().restarts;
    const started = performance.now();
    // Each lastIndexOf takes milliseconds and QuickJS polls its interrupt only every few thousand
    // operations, so only the parent's terminate stops this one near the deadline.
    const err = await failure(sandbox.run("var s = 'a'.repeat(1e7); while (true) { s.lastIndexOf('b'); }", input, { timeoutMs: 200 }));
    const ms = performance.now() - started;
    expect(err.kind).toBe('timeout');
    expect(err.message).toBe('script timed out after 200 ms (stopped by force)');
    expect(ms).toBeLessThan(5000);
    expect(sandbox.stats().restarts).toBe(before + 1);
    const results = await Promise.all([1, 2, 3, 4].map((n) => sandbox.run('return msg * 10;', { ...input, msg: n })));
    expect(results).toEqual([10, 20, 30, 40]);
  });

  it('cancels a running script when the signal aborts', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const running = sandbox.run('while (true) {}', input, { timeoutMs: 10_000, signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    const err = await failure(running);
    expect(err.kind).toBe('aborted');
    expect(performance.now() - started).toBeLessThan(5000);
    expect(await sandbox.run('return "ok";', input)).toBe('ok');
  });

  it('refuses work once closed, and fails what was waiting', async () => {
    const own = new ScriptSandbox({ workers: 1 });
    const pending = [own.run('while (true) {}', input), own.run('return 1;', input)].map(failure);
    await own.close();
    for (const err of await Promise.all(pending)) expect(err.kind).toBe('closed');
    expect((await failure(own.run('return 1;', input))).kind).toBe('closed');
  });
});

// Issue 20, finding 8: script failures were 500s, and two workers served twelve looping chats of
// one agent before any other agent's script.
describe('ScriptSandbox: failures are registered errors, and agents share the pool', () => {
  it('a script broken whatever its input is 422 SCRIPT_INVALID; one that fails as it runs is 502 SCRIPT_FAILED', async () => {
    const cases: Array<[string, string, number]> = [
      ['return {msg: ;', 'syntax', 422],
      ['var o = {}; o.self = o; return o;', 'result', 422],
      ["throw new Error('no temperature');", 'runtime', 502],
      ['while (true) {}', 'timeout', 502],
    ];
    for (const [code, kind, status] of cases) {
      const err = await failure(sandbox.run(code, input, { timeoutMs: 200 }));
      expect([err.kind, err.status, err.code], code).toEqual([kind, status, status === 422 ? 'SCRIPT_INVALID' : 'SCRIPT_FAILED']);
    }
    expect((await failure(sandbox.run('var o = {}; o.self = o; return o;', input))).message).toMatch(/^the script returned a value that is not JSON \(/);
  });

  it("a free worker goes to the key with the fewest scripts running: one agent's queue does not delay another's script", async () => {
    const own = new ScriptSandbox({ workers: 1 });
    try {
      await own.warmUp();
      const order: string[] = [];
      const busy = 'var t = Date.now(); while (Date.now() - t < 50) {} return 1;';
      const jobs = Array.from({ length: 6 }, (_, i) => own.run(busy, input, { key: 'looping-agent' }).then(() => order.push(`a${i}`)));
      jobs.push(own.run('return 2;', input, { key: 'other-agent' }).then(() => order.push('b')));
      await Promise.all(jobs);
      expect(order).toEqual(['a0', 'b', 'a1', 'a2', 'a3', 'a4', 'a5']);
    } finally {
      await own.close();
    }
  });
});
