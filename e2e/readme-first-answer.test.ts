import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, repoRoot, waitFor } from '@agentry/testing';

/**
 * A newcomer following README alone (issue 42): the commands of its "From `npm start` to a first
 * answer" block, run as written, one after the other, give the answer the block promises. Only
 * the ports change (the README's 9527 and 18080 may be taken on a test machine): the server's
 * through AGENTRY_URL, which the CLI reads, the fake model's in the two commands that name it.
 */
const run = promisify(execFile);
const README = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');

interface Step {
  n: number;
  command: string;
  comment: string;
}

/** The numbered commands of the block, with their comments. */
function firstAnswerSteps(): Step[] {
  const at = README.indexOf('**From `npm start` to a first answer**');
  if (at < 0) throw new Error('README has no "From `npm start` to a first answer" section');
  const block = /```sh\n([\s\S]*?)```/.exec(README.slice(at))![1]!;
  return block
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      const m = /^(.*?)\s+#\s*(\d+)\.\s*(.*)$/.exec(line);
      if (!m) throw new Error(`README block line without a numbered comment: ${line}`);
      return { n: Number(m[2]), command: m[1]!.trim(), comment: m[3]! };
    });
}

const processes: ChildProcess[] = [];
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-readme-'));
afterAll(async () => {
  for (const p of processes) {
    // The fake's shell is a process group of its own (npx, tsx and node under it): stop them all.
    if (p.pid && p.spawnargs[0] === 'bash') process.kill(-p.pid, 'SIGTERM');
    else p.kill('SIGTERM');
  }
  await new Promise((r) => setTimeout(r, 500));
  fs.rmSync(home, { recursive: true, force: true });
});

describe("README's first-answer path, followed as written", () => {
  it('takes five commands, from npm start to the answer it promises', { timeout: 240_000 }, async () => {
    const steps = firstAnswerSteps();
    expect(steps.map((s) => s.n)).toEqual([1, 2, 3, 4, 5]);
    expect(steps[0]!.command).toBe('npm start');
    const expected = /the answer:\s*(.+)$/.exec(steps.at(-1)!.comment)?.[1];
    expect(expected, 'the last step says what the answer is').toBeTruthy();

    const serverPort = await freePort();
    const fakePort = await freePort();
    // A newcomer's environment: none of the test run's DATABASE_URL, REDIS_URL or AGENTRY_* (with
    // them, `npm start` would run on the suite's shared Postgres and Redis).
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, AGENTRY_URL: `http://127.0.0.1:${serverPort}`, NO_COLOR: '1' };
    const withPorts = (c: string) => c.replaceAll('18080', String(fakePort));

    // 1. `npm start`, in a directory of its own (its data/ must not be the checkout's).
    const server = spawn(process.execPath, [path.join(repoRoot, 'services/standalone/bin/start.mjs')], {
      cwd: home,
      env: { ...env, PORT: String(serverPort), HOST: '127.0.0.1' },
      stdio: 'ignore',
    });
    processes.push(server);
    // 2. The fake model, as a long-running command of the second terminal.
    const fake = spawn('bash', ['-c', withPorts(steps[1]!.command)], { cwd: repoRoot, env, stdio: 'ignore', detached: true });
    processes.push(fake);
    await waitFor(() => fetch(`http://127.0.0.1:${serverPort}/ready`).then((r) => (r.ok ? true : undefined), () => undefined), 120_000, 200);
    await waitFor(() => fetch(`http://127.0.0.1:${fakePort}/v1/models`).then((r) => (r.ok ? true : undefined), () => undefined), 60_000, 200);

    let answer = '';
    for (const step of steps.slice(2)) {
      const { stdout } = await run('bash', ['-c', withPorts(step.command)], { cwd: repoRoot, env, timeout: 60_000 });
      answer = stdout;
    }
    expect(answer.trim()).toContain(expected!.trim());
  });
});
