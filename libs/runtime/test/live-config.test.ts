import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { listSettings, setSetting, deleteSetting, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite, waitFor } from '@agentry/testing';
import { LiveConfig, loadConfig } from '@agentry/runtime';

const logger = pino({ level: 'silent' });
let dir: string;
let handle: DbHandle;
let bus: Bus;
const opened: LiveConfig[] = [];

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-live-'));
  handle = await createTestPglite();
  bus = createMemoryBus({ logger });
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((l) => l.close()));
  await bus.close();
  await handle.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function open(yaml: string, env: Record<string, string> = {}): Promise<LiveConfig> {
  fs.writeFileSync(path.join(dir, 'config.yaml'), yaml);
  const live = await LiveConfig.open({
    loaded: loadConfig({ argv: [], env, cwd: dir }),
    logger,
    bus: bus.pubsub,
    refreshMs: 0,
    settings: {
      list: (prefix) => listSettings(handle.db, prefix),
      set: (key, value) => setSetting(handle.db, key, value as JsonValue).then(() => undefined),
      delete: (key) => deleteSetting(handle.db, key).then(() => undefined),
    },
  });
  opened.push(live);
  return live;
}

describe('LiveConfig: the file seeds, Postgres holds the live state', () => {
  it('keeps an API change across restarts while the file value is unchanged', async () => {
    const a = await open('server: {port: 1000}\n');
    await a.update({ server: { port: 2000 } });
    await a.close();
    const b = await open('server: {port: 1000}\n');
    expect(b.current.server.port).toBe(2000);
  });

  it('imports a file value again when it changed in the file', async () => {
    const a = await open('server: {port: 1000}\n');
    await a.update({ server: { port: 2000 } });
    const b = await open('server: {port: 3000}\n');
    expect(b.current.server.port).toBe(3000);
    // And once imported, an API change wins again on the next start.
    await b.update({ server: { port: 4000 } });
    const c = await open('server: {port: 3000}\n');
    expect(c.current.server.port).toBe(4000);
  });

  it('keeps an API change when the file does not set the key', async () => {
    const a = await open('');
    expect(a.current.server.port).toBe(9527);
    await a.update({ server: { port: 2000 } });
    expect((await open('')).current.server.port).toBe(2000);
  });

  it('lets PORT and HOST win over both', async () => {
    const a = await open('server: {port: 1000}\n');
    await a.update({ server: { port: 2000, host: '10.0.0.1' } });
    const b = await open('server: {port: 1000}\n', { PORT: '5555', HOST: '127.0.0.1' });
    expect(b.current.server).toMatchObject({ port: 5555, host: '127.0.0.1' });
  });

  it('stores one row per key, so replicas changing different keys do not overwrite each other', async () => {
    const a = await open('');
    const b = await open('');
    await Promise.all([a.update({ server: { port: 2000 } }), b.update({ security: { requireAuth: true } })]);
    await a.reload();
    expect(a.current.server.port).toBe(2000);
    expect(a.current.security.requireAuth).toBe(true);
  });

  it('tells other replicas through pub/sub and calls change listeners', async () => {
    const a = await open('');
    const b = await open('');
    const seen: number[] = [];
    b.onChange((c) => seen.push(c.server.port));
    await a.update({ server: { port: 2345 } });
    await waitFor(async () => b.current.server.port === 2345, 2000, 10);
    expect(seen).toEqual([2345]);
  });

  it('ignores a stored value that no longer validates instead of failing to start, keeping the others', async () => {
    await open('');
    await setSetting(handle.db, 'config.live.server.port', 'not-a-port');
    await setSetting(handle.db, 'config.live.server.host', '127.0.0.9');
    const b = await open('server: {port: 1234}\n');
    expect(b.current.server.port).toBe(1234);
    expect(b.current.server.host).toBe('127.0.0.9');
  });

  it('rejects non-editable keys and leaves storage untouched', async () => {
    const a = await open('');
    await expect(a.update({ data: { root_dir: '/x' } })).rejects.toThrow('data cannot be changed through this endpoint');
    await expect(a.update({ server: { port: -1 } })).rejects.toThrow(/server.port/);
    expect(await listSettings(handle.db, 'config.live.')).toEqual([]);
  });
});
