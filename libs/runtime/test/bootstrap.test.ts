import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { migrationNames, openPglite, pendingMigrations } from '@agentry/db';
import { bootstrap, Sealer } from '@agentry/runtime';

/**
 * Migrations run once per rollout in cluster mode: a replica never migrates on start unless told
 * to, waits for the migrate job, and fails with what to do when it does not come.
 */
describe('bootstrap and migrations', () => {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-boot-'));
  afterAll(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const env = { DATABASE_URL: 'postgres://unused', REDIS_URL: 'redis://unused', AGENTRY_SECRET_KEY: 'bootstrap-test-master-key-0123456789' };

  const boot = (db: Awaited<ReturnType<typeof openPglite>>, extra: Record<string, string>) =>
    bootstrap({
      service: 'boot-test',
      mode: 'cluster',
      argv: [],
      env: { ...env, ...extra },
      cwd,
      logDestination: { write: () => undefined },
      openDb: async () => db,
      openBus: (logger) => createMemoryBus({ logger }),
    });

  it('a cluster replica refuses an unmigrated database after its wait, naming the fix; AGENTRY_MIGRATE_ON_START migrates', async () => {
    const db = await openPglite({ dataDir: null });
    expect(await pendingMigrations(db.db)).toEqual(migrationNames());
    const started = Date.now();
    await expect(boot(db, { AGENTRY_MIGRATION_WAIT_MS: '300' })).rejects.toThrow(/migration\(s\) pending \(first: .*\).*npm run migrate/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);

    const fresh = await openPglite({ dataDir: null });
    const runtime = await boot(fresh, { AGENTRY_MIGRATE_ON_START: 'true' });
    expect(await pendingMigrations(runtime.db.db)).toEqual([]);
    await runtime.lifecycle.shutdown('test');
  });

  it('reads the master key and the admin password from *_FILE variables (compose secrets), not from the environment', async () => {
    const key = 'file-master-key-0123456789abcdef0123456789';
    fs.writeFileSync(path.join(cwd, 'key'), `${key}\n`);
    fs.writeFileSync(path.join(cwd, 'admin'), 'initial-admin-from-a-file\n');
    fs.writeFileSync(path.join(cwd, 'admin-from-file.yaml'), 'security:\n  users:\n    admin: ${AGENTRY_ADMIN_PASSWORD}\n');
    const { AGENTRY_SECRET_KEY: _unused, ...withoutKey } = env;
    const runtime = await bootstrap({
      service: 'boot-test',
      mode: 'cluster',
      argv: ['--config', path.join(cwd, 'admin-from-file.yaml')],
      env: { ...withoutKey, AGENTRY_SECRET_KEY_FILE: path.join(cwd, 'key'), AGENTRY_ADMIN_PASSWORD_FILE: path.join(cwd, 'admin'), AGENTRY_MIGRATE_ON_START: 'true' },
      cwd,
      logDestination: { write: () => undefined },
      openDb: async () => openPglite({ dataDir: null }),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    try {
      expect(runtime.loaded.config.security.users).toEqual({ admin: 'initial-admin-from-a-file' });
      // Sealed with the file's key: another Sealer with that key opens it.
      expect(new Sealer(key).open(runtime.secrets.seal('s'))).toBe('s');
    } finally {
      await runtime.lifecycle.shutdown('test');
    }
  });

  it('a replica started before the migrate job waits for it, then starts', async () => {
    const db = await openPglite({ dataDir: null });
    const { migrateToLatest } = await import('@agentry/db');
    const starting = boot(db, { AGENTRY_MIGRATION_WAIT_MS: '20000' });
    await new Promise((r) => setTimeout(r, 500));
    await migrateToLatest(db.db);
    const runtime = await starting;
    expect(runtime.mode).toBe('cluster');
    await runtime.lifecycle.shutdown('test');
  });
});
