import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';

const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-standalone-'));
afterAll(() => fs.rmSync(cwd, { recursive: true, force: true }));

it('composes the four services on one runtime, serves, and closes them in reverse order', async () => {
  const lines: string[] = [];
  const runtime = await bootstrap({
    service: 'standalone',
    mode: 'embedded',
    argv: [],
    env: { PORT: '0', HOST: '127.0.0.1' },
    cwd,
    logDestination: { write: (l: string) => void lines.push(l) },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  const { port } = await startStandalone(runtime);
  expect(port).toBeGreaterThan(0);
  expect(await (await fetch(`http://127.0.0.1:${port}/health`)).text()).toBe('OK');
  expect((await fetch(`http://127.0.0.1:${port}/ready`)).status).toBe(200);

  expect(await runtime.lifecycle.shutdown('test')).toBe(true);
  const events = lines.map((l) => JSON.parse(l) as { msg: string }).map((l) => l.msg);
  const stopped = events.filter((m) => / stopped$/.test(m));
  expect(stopped).toEqual(['channel-connector stopped', 'scheduler stopped', 'agent-worker stopped']);
  await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
});
