import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestPglite } from '@agentry/testing';
import { getSetting, migrateToLatest, migrationNames, openPglite, setSetting, type DbHandle } from '../src/index.js';
import { defineDbSuite } from './db-suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PGlite (in memory)', () => {
  let handle: DbHandle;
  beforeAll(async () => {
    handle = await createTestPglite();
    expect(handle.dialect).toBe('pglite');
  });
  afterAll(() => handle?.close());

  defineDbSuite(() => handle);

  it('runs with small shared buffers and reports the size of its WebAssembly memory', async () => {
    // Postgres' default (128MB) kept ~150 MB of PGlite's memory resident in every embedded server.
    const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(handle.db);
    expect(rows[0]!.shared_buffers).toBe('16MB');
    // WebAssembly memory comes in 64 KiB pages, and PGlite's module asks for 128 MB at least.
    const bytes = handle.memoryBytes!();
    expect(bytes % 65536).toBe(0);
    expect(bytes).toBeGreaterThanOrEqual(128 * 1024 * 1024);
  });

  describe('single connection', () => {
    it('runs concurrent transactions one after the other', async () => {
      const events: string[] = [];
      const run = (name: string) =>
        handle.db.transaction().execute(async (trx) => {
          events.push(`${name}:begin`);
          await setSetting(trx, `${name}.1`, 1);
          await sleep(20);
          await setSetting(trx, `${name}.2`, 2);
          events.push(`${name}:end`);
        });
      await Promise.all([run('x'), run('y'), run('z')]);
      expect(events).toEqual(['x:begin', 'x:end', 'y:begin', 'y:end', 'z:begin', 'z:end']);
    });

    it('makes a query outside a transaction wait until it ends', async () => {
      const events: string[] = [];
      let inside!: () => void;
      const started = new Promise<void>((r) => (inside = r));
      const tx = handle.db.transaction().execute(async (trx) => {
        await setSetting(trx, 'wait.1', 'from tx');
        inside();
        await sleep(30);
        events.push('commit');
      });
      await started;
      const outside = getSetting(handle.db, 'wait.1').then((v) => {
        events.push('read');
        return v;
      });
      await tx;
      // Had the read slipped into the open transaction it would have run before the commit.
      expect(await outside).toBe('from tx');
      expect(events).toEqual(['commit', 'read']);
    });

    it('leaves the database usable after a statement fails at its parse, its bind or its execution, with Postgres\' error', async () => {
      // The dialect sends a statement's protocol messages in one call and keeps it under a name:
      // a failure at any step must end with the backend ready, and a named statement reusable.
      await expect(sql`selec 1`.execute(handle.db)).rejects.toMatchObject({ code: '42601', query: 'selec 1' });
      const asInt = (v: string) => sql<{ n: number }>`select ${v}::int as n`.execute(handle.db);
      await expect(asInt('x')).rejects.toMatchObject({ code: '22P02', params: ['x'] });
      expect((await asInt('5')).rows).toEqual([{ n: 5 }]);
      expect((await asInt('6')).rows).toEqual([{ n: 6 }]);
      await sql`create temp table dialect_errors (id int primary key)`.execute(handle.db);
      const insert = (db: Parameters<typeof setSetting>[0], id: number) => sql`insert into dialect_errors (id) values (${id})`.execute(db);
      await expect(
        handle.db.transaction().execute(async (trx) => {
          await insert(trx, 1);
          await insert(trx, 1);
        }),
      ).rejects.toMatchObject({ code: '23505' });
      const { numAffectedRows } = await insert(handle.db, 2);
      expect(numAffectedRows).toBe(1n);
      expect((await sql<{ id: number }>`select id from dialect_errors order by id`.execute(handle.db)).rows).toEqual([{ id: 2 }]);
    });

    it('rolls back a transaction a raw connection left open', async () => {
      await handle.db.connection().execute(async (conn) => {
        await sql`begin`.execute(conn);
        await setSetting(conn, 'leak.1', 1);
      });
      expect(await getSetting(handle.db, 'leak.1')).toBeUndefined();
    });
  });
});

describe('PGlite (folder)', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'agentry-db-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('creates the folder and keeps data across reopen; a closed handle refuses queries', async () => {
    const dataDir = path.join(root, 'nested', 'pgdata');
    const first = await openPglite({ dataDir });
    try {
      expect(await migrateToLatest(first.db)).toEqual({ applied: migrationNames() });
      await setSetting(first.db, 'kept', { across: 'restart' });
    } finally {
      await first.close();
    }
    expect((await stat(dataDir)).isDirectory()).toBe(true);
    await expect(first.ping()).rejects.toThrow(/closed|destroyed/i);
    await first.close();

    const second = await openPglite({ dataDir });
    try {
      expect(await migrateToLatest(second.db)).toEqual({ applied: [] });
      expect(await getSetting(second.db, 'kept')).toEqual({ across: 'restart' });
    } finally {
      await second.close();
    }
  });

  it('makes a new folder\'s database in a child process: this process starts one PGlite, and no staging folder is left', async () => {
    // PGlite's initdb starts a second instance (PGlite.create again) and copies its whole
    // WebAssembly memory: run here, it left a first start's server at ~600 MB peak, ~256 MB idle.
    const dataDir = path.join(root, 'fresh', 'pgdata');
    const create = vi.spyOn(PGlite, 'create');
    let handle: DbHandle | undefined;
    try {
      handle = await openPglite({ dataDir });
      expect(create).toHaveBeenCalledTimes(1);
      expect(await migrateToLatest(handle.db)).toEqual({ applied: migrationNames() });
    } finally {
      create.mockRestore();
      await handle?.close();
    }
    expect((await stat(path.join(dataDir, 'PG_VERSION'))).isFile()).toBe(true);
    expect(await readdir(path.dirname(dataDir))).toEqual(['pgdata']);
  });

  it('refuses a folder that holds files but no database, saying what to do, and leaves it as it was', async () => {
    const dataDir = path.join(root, 'cluttered');
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, 'notes.txt'), 'mine');
    await expect(openPglite({ dataDir })).rejects.toThrow(/holds no database \(move it away\)/);
    expect(await readdir(dataDir)).toEqual(['notes.txt']);
    expect(await readdir(root)).not.toContainEqual(expect.stringMatching(/initdb/));
  });
});
