import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, repoRoot, waitFor } from '@agentry/testing';

/**
 * `npm start` runs services/standalone/bin/start.mjs (scripts/start.mjs): the compiled standalone,
 * built first when a package it needs changed after the last build (and it says why). Either way
 * the newcomer's command must answer /health.
 */
const launcher = path.join(repoRoot, 'services/standalone/bin/start.mjs');
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-npm-start-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function startAndProbe(): Promise<{ stderr: string; health: string; ready: number }> {
  const port = await freePort();
  const proc = spawn(process.execPath, [launcher], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  try {
    const health = await waitFor(() => fetch(`http://127.0.0.1:${port}/health`).then((r) => (r.ok ? r.text() : undefined), () => undefined), 60_000, 100);
    const ready = (await fetch(`http://127.0.0.1:${port}/ready`)).status;
    return { stderr, health, ready };
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
}

describe('npm start', () => {
  it('starts the standalone and answers /health and /ready', async () => {
    const { health, ready } = await startAndProbe();
    expect(health).toBe('OK');
    expect(ready).toBe(200);
  }, 90_000);

  it('builds what changed after the last build, says why, and runs compiled', async () => {
    // A source file of a dependency of the standalone, made newer than any build of it.
    const file = path.join(repoRoot, 'libs/errors/src/index.ts');
    const before = fs.statSync(file);
    fs.utimesSync(file, before.atime, new Date());
    try {
      const { stderr, health } = await startAndProbe();
      expect(health).toBe('OK');
      expect(stderr).toMatch(/agentry: transpiling [^\n]*libs\/errors[^\n]* first \((there is no build yet|the build is older than the sources of [^)]*libs\/errors)/);
      expect(stderr).toMatch(/agentry: transpiled in \d+\.\d s/);
      expect(stderr).not.toMatch(/starting from the TypeScript sources/);
    } finally {
      fs.utimesSync(file, before.atime, before.mtime);
    }
  }, 90_000);
});
