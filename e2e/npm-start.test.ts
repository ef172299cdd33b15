import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
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

async function startAndProbe(script = launcher): Promise<{ stderr: string; health: string; ready: number; ui: string; openapiVersion: string }> {
  const port = await freePort();
  const proc = spawn(process.execPath, [script], {
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
    const ui = await (await fetch(`http://127.0.0.1:${port}/`)).text();
    const openapi = (await (await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`)).json()) as { info: { version: string } };
    return { stderr, health, ready, ui, openapiVersion: openapi.info.version };
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

  it('makes one bundle of the standalone that starts as dist/ does and lists the files it was made from', async () => {
    const entry = 'services/standalone/src/main.ts';
    const start = path.join(repoRoot, 'scripts/start.mjs');
    execFileSync(process.execPath, [start, '--build-only', entry], { cwd: repoRoot, stdio: 'ignore' });
    execFileSync(process.execPath, [path.join(repoRoot, 'services/web/scripts/ensure-build.mjs'), '--soft'], { cwd: repoRoot, stdio: 'ignore' });
    execFileSync(process.execPath, [start, '--bundle-only', entry], { cwd: repoRoot, stdio: 'ignore' });
    const bundleDir = path.join(repoRoot, 'services/standalone/dist/bundle');
    const inputs = JSON.parse(fs.readFileSync(path.join(bundleDir, 'main.inputs.json'), 'utf8')) as { failed: boolean; files: string[] };
    expect(inputs.failed).toBe(false);
    // What makes it stale: the compiled files of every workspace package it holds.
    expect(inputs.files).toEqual(expect.arrayContaining(['libs/errors/dist/src/index.js', 'services/gateway/dist/src/openapi.js', 'services/standalone/dist/src/main.js']));
    // Modules that find files beside themselves still find them from the bundle: the web UI's
    // build (services/web/build) and the gateway's package.json (the document's version).
    const gatewayVersion = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'services/gateway/package.json'), 'utf8')) as { version: string }).version;
    const { health, ready, ui, openapiVersion } = await startAndProbe(path.join(bundleDir, 'main.mjs'));
    expect(health).toBe('OK');
    expect(ready).toBe(200);
    expect(ui).toContain('<div id="root">');
    expect(openapiVersion).toBe(gatewayVersion);
  }, 120_000);
});
