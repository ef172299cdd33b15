import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnService, type SpawnedService } from '@agentry/testing';

/**
 * Embedded mode as a newcomer runs it: one process, PGlite under data.root_dir, no Postgres,
 * no Redis. Each test gets its own working directory so that nothing leaks between them.
 */
const running: SpawnedService[] = [];
let cwd: string;

beforeAll(() => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-embedded-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});
afterAll(() => fs.rmSync(cwd, { recursive: true, force: true }));

function start(args: string[] = [], env: Record<string, string> = {}): SpawnedService {
  const svc = spawnService('services/standalone/src/main.ts', { args, env, cwd });
  running.push(svc);
  return svc;
}

async function get(port: number, p: string) {
  const res = await fetch(`http://127.0.0.1:${port}${p}`);
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/**
 * How long a start may take to listen: a first start makes its database (PGlite's initdb, ~10 s
 * on a quiet box; 34 s was seen with the whole suite and other work on 2 cores).
 */
const LISTEN_MS = 120_000;

describe('embedded mode', () => {
  it('starts with no configuration at all, answers /health and the spec-shaped /config', async () => {
    const port = await freePort();
    const svc = start([], { PORT: String(port), HOST: '127.0.0.1' });
    await svc.waitForLine(/gateway listening/, LISTEN_MS);

    const health = await get(port, '/health');
    expect(health).toMatchObject({ status: 200, text: 'OK' });
    expect(health.type).toMatch(/^text\/plain/);

    const ready = await get(port, '/ready');
    expect(ready.status).toBe(200);

    const config = JSON.parse((await get(port, '/api/v1/config')).text);
    expect(config).toEqual({
      server: { host: '127.0.0.1', port },
      data: { root_dir: './data', logs_dir: './data/logs' },
      models: { default_provider: '', providers: {} },
      security: { requireAuth: false, users: { admin: true }, allowFrom: { management: [], chat: [] } },
    });
    expect(fs.existsSync(path.join(cwd, 'data', 'pgdata'))).toBe(true);
    expect(fs.existsSync(path.join(cwd, 'data', 'logs', 'agentry.log'))).toBe(true);

    // Every log line is JSON; request lines carry the request id.
    const lines = svc.output().split('\n').filter((l) => l.startsWith('{'));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();

    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(svc.output()).toMatch(/shutdown complete/);
  }, LISTEN_MS + 30_000);

  it('uses --config, hides secrets, and keeps a PUT port across a restart', async () => {
    const first = await freePort();
    const second = await freePort();
    const file = path.join(cwd, 'custom.yaml');
    fs.writeFileSync(
      file,
      [
        'server:',
        '  host: 127.0.0.1',
        `  port: ${first}`,
        'data:',
        '  root_dir: ./custom-data',
        'models:',
        '  default_provider: fake',
        '  providers:',
        '    fake:',
        '      base_url: http://127.0.0.1:1/v1',
        '      api_key: ${FAKE_KEY}',
        '      models: [{name: m1, alias: default}]',
        'security:',
        '  users:',
        '    alice: "pw-alice-123:sk-alice-secret-0123456789"',
      ].join('\n'),
    );
    const env = { FAKE_KEY: 'sk-provider-secret-value' };
    let svc = start(['--config', file], env);
    await svc.waitForLine(/gateway listening/, LISTEN_MS);
    const view = await get(first, '/api/v1/config');
    expect(view.text).not.toMatch(/sk-provider-secret-value|pw-alice|sk-alice-secret-0123456789/);
    expect(JSON.parse(view.text)).toMatchObject({
      data: { root_dir: './custom-data', logs_dir: './custom-data/logs' },
      models: { default_provider: 'fake', providers: { fake: { id: 'fake', base_url: 'http://127.0.0.1:1/v1', model: 'm1' } } },
      security: { users: { alice: true } },
    });
    expect(svc.output()).not.toMatch(/sk-provider-secret-value|pw-alice|sk-alice-secret-0123456789/);

    const put = await fetch(`http://127.0.0.1:${first}/api/v1/config`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ server: { port: second } }),
    });
    expect(put.status).toBe(200);
    expect(((await put.json()) as { server: { port: number } }).server.port).toBe(second);
    // The running process keeps its port until the next start.
    expect((await get(first, '/health')).status).toBe(200);
    expect(await svc.stop()).toBe(0);

    svc = start(['--config', file], env);
    await svc.waitForLine(/gateway listening/, LISTEN_MS);
    expect((await get(second, '/health')).text).toBe('OK');
    expect(JSON.parse((await get(second, '/api/v1/config')).text).server.port).toBe(second);
    await expect(fetch(`http://127.0.0.1:${first}/health`)).rejects.toThrow();
    // Two starts (the second finds its database made): the test's own bound covers both.
  }, LISTEN_MS + 60_000);
});

describe('start-up errors: one line naming the problem, exit code 1, no stack trace', () => {
  const cases: Array<[string, string, Record<string, string>, RegExp]> = [
    ['bad YAML', 'server:\n  port: [1\n', {}, /^agentry standalone: Configuration error: bad\.yaml: bad YAML at line \d+/],
    ['a bad type', 'server:\n  port: abc\n', {}, /^agentry standalone: Configuration error: bad\.yaml: server\.port: must be integer$/],
    ['a missing variable', 'security:\n  users:\n    admin: ${ADMIN_PW}\n', {}, /security\.users\.admin: environment variable ADMIN_PW is not set$/],
    ['an unknown key', 'sever:\n  port: 1\n', {}, /unknown key sever$/],
  ];
  for (const [what, yaml, env, expected] of cases) {
    it(what, async () => {
      const file = path.join(cwd, 'bad.yaml');
      fs.writeFileSync(file, yaml);
      const svc = start(['--config', file], env);
      expect(await svc.exited()).toBe(1);
      const lines = svc.output().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(expected);
      expect(svc.output()).not.toMatch(/\n\s+at /);
    });
  }
});
