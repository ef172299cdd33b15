import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, spawnService, waitFor } from '@agentry/testing';

/**
 * `npm start` as a person sees it: the standalone in a tmux pane (a real terminal) prints human
 * log lines, then a banner (URL, how to log in, whether the server is open), then stays quiet;
 * the same start through a pipe (a container, a log collector) stays JSON lines with no banner.
 */
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const suite = hasTmux || process.env.CI === 'true' ? describe : describe.skip;
if (!hasTmux) console.warn('\n!!! SKIPPING the terminal test of the standalone: tmux is not installed\n');

const SOCKET = `agentry-standalone-test-${process.pid}`;
const dirs: string[] = [];
const tempDir = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-start-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  if (hasTmux) spawnSync('tmux', ['-L', SOCKET, 'kill-server']);
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', SOCKET, '-f', '/dev/null', ...args], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: process.env.HOME, TERM: 'xterm-256color' } });
}

function screen(): string {
  return tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'start:0')
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .trim();
}

async function waitScreen(ok: (s: string) => boolean, timeoutMs: number): Promise<string> {
  try {
    await waitFor(async () => ok(screen()), timeoutMs, 200);
  } catch (err) {
    throw new Error(`${(err as Error).message}; the screen:\n${screen()}`);
  }
  return screen();
}

const entry = path.join(repoRoot, 'services/standalone/src/main.ts');
const node = `'${process.execPath}' --conditions=@agentry/source --import '${import.meta.resolve('tsx')}' '${entry}'`;

suite('the standalone on a terminal', () => {
  it('prints human lines and a banner with the URL, the login and the security state, then only warnings', async () => {
    const cwd = tempDir();
    // PORT=0: the banner must name the port actually bound, not the configured one.
    const shell = `cd '${cwd}' && PORT=0 HOST=127.0.0.1 ${node}; echo "[exit $?]"; sleep 60`;
    tmux('new-session', '-d', '-s', 'start', '-x', '160', '-y', '50', shell);
    const s = await waitScreen((t) => /Security:/.test(t) || /\[exit \d+\]/.test(t), 90_000);

    expect(s).not.toMatch(/\[exit/);
    // Human log lines: a time, a level, the message; no JSON object on the screen.
    expect(s).toMatch(/^\d\d:\d\d:\d\d INFO +standalone starting/m);
    expect(s).not.toMatch(/^\{"level"/m);
    const url = /Agentry is ready: open (http:\/\/127\.0\.0\.1:(\d+))/.exec(s);
    expect(url, s).not.toBeNull();
    expect(Number(url![2])).toBeGreaterThan(0);
    expect(s).toMatch(/Log in: +not needed/);
    expect(s).toMatch(/Security: open server from this machine only/);
    expect(s).toMatch(/Logs: +data\/logs\/agentry\.log/);

    // Quiet afterwards: a request logged at info reaches the file, not the screen.
    const before = screen();
    const res = await fetch(`${url![1]}/api/v1/agents/nobody-has-this-one`);
    expect(res.status).toBe(404);
    const logFile = path.join(cwd, 'data/logs/agentry.log');
    await waitFor(async () => fs.readFileSync(logFile, 'utf8').includes('nobody-has-this-one'), 10_000, 100);
    expect(screen()).toBe(before);
  }, 120_000);

  it('keeps JSON lines and prints no banner when stdout is not a terminal', async () => {
    const svc = spawnService('services/standalone/src/main.ts', { cwd: tempDir(), env: { PORT: '0', HOST: '127.0.0.1' } });
    try {
      await svc.waitForLine(/gateway listening/, 90_000);
      // The banner would come right after; give it the time a database read takes.
      await new Promise((r) => setTimeout(r, 1000));
      const lines = svc.output().split('\n').filter((l) => l.trim() !== '');
      expect(lines.length).toBeGreaterThan(3);
      for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
      expect(svc.output()).not.toMatch(/Agentry is ready/);
    } finally {
      await svc.stop();
    }
  }, 120_000);
});
