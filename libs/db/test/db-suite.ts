import { sql, type Migration } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  MigrationError,
  deleteSetting,
  finishRun,
  insertRuleChain,
  insertRun,
  listUnfinishedRuns,
  getSetting,
  listSettings,
  migrateToLatest,
  migrationNames,
  setSetting,
  type DbHandle,
  type JsonValue,
} from '../src/index.js';
import { runMigrations } from '../src/migrate.js';
import { migrations } from '../src/migrations/index.js';

/**
 * The behaviour both engines must share, run once against Postgres and once against PGlite.
 * `get` is called inside tests, after the caller's beforeAll has opened the database.
 */
export function defineDbSuite(get: () => DbHandle): void {
  beforeEach(async () => {
    await get().db.deleteFrom('settings').execute();
  });

  describe('dialect behaviour', () => {
    it('answers ping', async () => {
      await get().ping();
    });

    it('reads int8 as a number when it fits and as a bigint when it does not; numeric as a string', async () => {
      const { db } = get();
      await db.insertInto('settings').values([1, 2, 3].map((i) => ({ key: `k${i}`, value: '1' }))).execute();
      const { n } = await db
        .selectFrom('settings')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      expect(n).toBe(3);
      const { rows } = await sql<{ small: unknown; big: unknown; dec: unknown }>`
        select 42::int8 as small, 9007199254740993::int8 as big, 1.50::numeric as dec`.execute(db);
      expect(rows[0]).toEqual({ small: 42, big: 9007199254740993n, dec: '1.50' });
    });

    it('reads timestamptz as a Date', async () => {
      const { db } = get();
      const { rows } = await sql<{ t: unknown }>`select now() as t`.execute(db);
      expect(rows[0]?.t).toBeInstanceOf(Date);
      const saved = await setSetting(db, 'when', 1);
      expect(saved.updatedAt).toBeInstanceOf(Date);
      expect(Math.abs(saved.updatedAt.getTime() - Date.now())).toBeLessThan(60_000);
    });

    it('round-trips jsonb values of every JSON shape', async () => {
      const { db } = get();
      const values: JsonValue[] = [
        { a: 1, nested: { list: [1, 'two', null, true], empty: {} } },
        [1, 2, 3],
        [{ x: 1 }],
        [],
        'text with "quotes" and ünïcode',
        '',
        0,
        -1.5,
        true,
        false,
        null,
      ];
      for (const [i, value] of values.entries()) await setSetting(db, `json.${i}`, value);
      for (const [i, value] of values.entries()) expect(await getSetting(db, `json.${i}`)).toEqual(value);
    });

    it('rolls back a transaction that throws', async () => {
      const { db } = get();
      await expect(
        db.transaction().execute(async (trx) => {
          await setSetting(trx, 'tx.a', 1);
          expect(await getSetting(trx, 'tx.a')).toBe(1);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await getSetting(db, 'tx.a')).toBeUndefined();
      // The connection is usable afterwards.
      await db.transaction().execute((trx) => setSetting(trx, 'tx.b', 2));
      expect(await getSetting(db, 'tx.b')).toBe(2);
    });

    it('rolls back to a savepoint', async () => {
      const { db } = get();
      const trx = await db.startTransaction().execute();
      await setSetting(trx, 'sp.kept', 1);
      const sp = await trx.savepoint('before_drop').execute();
      await setSetting(sp, 'sp.dropped', 2);
      const back = await sp.rollbackToSavepoint('before_drop').execute();
      await back.commit().execute();
      expect((await listSettings(db, 'sp.')).map((s) => s.key)).toEqual(['sp.kept']);
    });

    it('reports affected rows for insert, update and delete', async () => {
      const { db } = get();
      const inserted = await db
        .insertInto('settings')
        .values([{ key: 'a.1', value: '1' }, { key: 'a.2', value: '2' }])
        .executeTakeFirstOrThrow();
      expect(inserted.numInsertedOrUpdatedRows).toBe(2n);
      const updated = await db.updateTable('settings').set({ value: '3' }).where('key', 'like', 'a.%').executeTakeFirstOrThrow();
      expect(updated.numUpdatedRows).toBe(2n);
      const deleted = await db.deleteFrom('settings').where('key', '=', 'a.1').executeTakeFirstOrThrow();
      expect(deleted.numDeletedRows).toBe(1n);
    });

    it('refuses to stream with a clear error', async () => {
      const consume = async () => {
        for await (const row of get().db.selectFrom('settings').selectAll().stream()) void row;
      };
      await expect(consume()).rejects.toThrow(/stream|cursor/i);
    });
  });

  describe('migrations', () => {
    it('are named YYYYMMDDTHHMMSS_topic and listed in order', () => {
      const names = Object.keys(migrations);
      for (const name of names) expect(name).toMatch(/^\d{8}T\d{6}_[a-z0-9_]+$/);
      expect(names).toEqual([...names].sort());
      expect(migrationNames()).toEqual(names);
    });

    it('are all applied, and a second run applies nothing', async () => {
      const { db } = get();
      expect(await migrateToLatest(db)).toEqual({ applied: [] });
      const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
      expect(rows.map((r) => r.name)).toEqual(migrationNames());
    });

    it('fail with the migration named, leaving nothing of the failed run behind', async () => {
      const { db } = get();
      const broken: Migration = {
        async up(trx) {
          await trx.schema.createTable('half_done').addColumn('id', 'integer').execute();
          await sql`select * from no_such_table`.execute(trx);
        },
      };
      const set = { ...migrations, '29991231T000000_before': { up: async () => undefined }, '29991231T000001_broken': broken };
      const error = await runMigrations(db, set).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(MigrationError);
      expect((error as MigrationError).migration).toBe('29991231T000001_broken');
      expect((error as Error).message).toMatch(/^migration 29991231T000001_broken failed.*no_such_table/);
      const tables = await db.introspection.getTables();
      expect(tables.map((t) => t.name)).not.toContain('half_done');
      const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
      expect(rows.map((r) => r.name)).toEqual(migrationNames());
    });
  });

  describe('settings repository', () => {
    it('gets, sets, replaces and deletes', async () => {
      const { db } = get();
      expect(await getSetting(db, 'theme')).toBeUndefined();
      const first = await setSetting(db, 'theme', { dark: true });
      expect(first).toMatchObject({ key: 'theme', value: { dark: true } });
      expect(await getSetting(db, 'theme')).toEqual({ dark: true });
      await new Promise((r) => setTimeout(r, 10));
      const second = await setSetting(db, 'theme', ['a', 'b']);
      expect(second.value).toEqual(['a', 'b']);
      expect(second.updatedAt.getTime()).toBeGreaterThan(first.updatedAt.getTime());
      expect(await getSetting(db, 'theme')).toEqual(['a', 'b']);
      await setSetting(db, 'nothing', null);
      expect(await getSetting(db, 'nothing')).toBeNull();
      expect(await deleteSetting(db, 'theme')).toBe(true);
      expect(await deleteSetting(db, 'theme')).toBe(false);
      expect(await getSetting(db, 'theme')).toBeUndefined();
    });

    it('lists by key, optionally by literal prefix', async () => {
      const { db } = get();
      for (const key of ['b.two', 'a.one', 'B.upper', 'a_x', 'a%y', 'ab', 'a.two']) await setSetting(db, key, key);
      expect((await listSettings(db)).map((s) => s.key)).toEqual(['B.upper', 'a%y', 'a.one', 'a.two', 'a_x', 'ab', 'b.two']);
      expect((await listSettings(db, 'a.')).map((s) => s.key)).toEqual(['a.one', 'a.two']);
      expect((await listSettings(db, 'a_')).map((s) => s.key)).toEqual(['a_x']);
      expect((await listSettings(db, 'a%')).map((s) => s.key)).toEqual(['a%y']);
      expect(await listSettings(db, 'zzz')).toEqual([]);
      const [one] = await listSettings(db, 'a.one');
      expect(one).toEqual({ key: 'a.one', value: 'a.one', updatedAt: expect.any(Date) });
    });

    it('works inside a transaction', async () => {
      const { db } = get();
      await db.transaction().execute(async (trx) => {
        await setSetting(trx, 't.1', 1);
        await setSetting(trx, 't.2', 2);
        expect(await listSettings(trx, 't.')).toHaveLength(2);
      });
      expect(await listSettings(db, 't.')).toHaveLength(2);
    });

    it('rejects a value JSON cannot represent', async () => {
      await expect(setSetting(get().db, 'bad', undefined as unknown as JsonValue)).rejects.toThrow(/JSON/);
    });
  });

  describe('runs repository', () => {
    it('lists runs still queued or running past an age, oldest first, for the sweep', async () => {
      const { db } = get();
      const agent = `sweep-${Math.random().toString(36).slice(2, 8)}`;
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      const run = (id: string) => insertRun(db, { id: `${agent}-${id}`, agentId: agent, sessionId: null, source: 'api', request: {} });
      for (const id of ['old-queued', 'older-running', 'old-done', 'new-queued']) await run(id);
      await sql`update runs set created_at = now() - interval '10 minutes' where id in (${`${agent}-old-queued`}, ${`${agent}-old-done`})`.execute(db);
      await sql`update runs set created_at = now() - interval '20 minutes', status = 'running' where id = ${`${agent}-older-running`}`.execute(db);
      await finishRun(db, `${agent}-old-done`, { status: 'succeeded' });
      const listed = (await listUnfinishedRuns(db, { olderThanMs: 60_000, limit: 10 })).filter((r) => r.id.startsWith(agent));
      expect(listed.map((r) => [r.id, r.status])).toEqual([
        [`${agent}-older-running`, 'running'],
        [`${agent}-old-queued`, 'queued'],
      ]);
      expect((await listUnfinishedRuns(db, { olderThanMs: 60_000, limit: 1 })).length).toBe(1);
    });
  });
}
