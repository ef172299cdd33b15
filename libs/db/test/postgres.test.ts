import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@agentry/testing';
import { describeWithPostgres } from '@agentry/testing';
import { freePort } from '@agentry/testing';
import { isDatabaseUnavailable, migrateToLatest, migrationNames, type DbHandle, type DbLogger } from '../src/index.js';
import { openPostgres } from '../src/postgres.js';
import { defineDbSuite } from './db-suite.js';

describeWithPostgres('Postgres (pg pool)', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase();
    expect(test.handle.dialect).toBe('postgres');
  });
  afterAll(() => test?.drop());

  defineDbSuite(() => test.handle);

  describe('pool', () => {
    it('leaves the global pg type parsers alone', () => {
      expect(pg.types.getTypeParser(20, 'text')('5')).toBe('5');
    });

    it('logs an idle client killed by the server instead of crashing, then reconnects', async () => {
      const errors: unknown[] = [];
      const logger = { debug() {}, info() {}, warn() {}, error: (obj: unknown) => errors.push(obj) } as unknown as DbLogger;
      const handle = openPostgres({ url: test.url, poolMax: 1, logger });
      try {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(handle.db);
        await sql`select pg_terminate_backend(${rows[0]?.pid})`.execute(test.handle.db);
        for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
        expect(errors).toHaveLength(1);
        await handle.ping();
      } finally {
        await handle.close();
      }
    });
  });

  describe('prepared statements', () => {
    const prepared = async (db: DbHandle['db']) =>
      (await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements order by name`.execute(db)).rows;

    it('prepares a statement with parameters once per connection, never a select * or returning *, and survives a migration', async () => {
      const handle = openPostgres({ url: test.url, poolMax: 1 });
      try {
        await sql`create table prep_probe (a int primary key, b text)`.execute(handle.db);
        await sql`insert into prep_probe values (1, 'one'), (2, 'two')`.execute(handle.db);
        const named = () => handle.db.selectFrom('prep_probe' as never).select(['a', 'b'] as never).where('a' as never, '=', 1 as never).execute();
        const star = () => handle.db.selectFrom('prep_probe' as never).selectAll().where('a' as never, '=', 2 as never).execute();
        for (let i = 0; i < 3; i++) {
          expect(await named()).toEqual([{ a: 1, b: 'one' }]);
          expect(await star()).toEqual([{ a: 2, b: 'two' }]);
        }
        // One connection (poolMax 1): its prepared statements are listed on it.
        const list = (await prepared(handle.db)).filter((p) => p.statement.includes('prep_probe'));
        expect(list).toHaveLength(1);
        expect(list[0]!.name).toMatch(/^a_[\w-]+$/);
        expect(list[0]!.statement).toBe('select "a", "b" from "prep_probe" where "a" = $1');
        // A migration adds a column: the named statement is replanned by Postgres, the select * was never prepared.
        await sql`alter table prep_probe add column c int default 7`.execute(handle.db);
        expect(await named()).toEqual([{ a: 1, b: 'one' }]);
        expect(await star()).toEqual([{ a: 2, b: 'two', c: 7 }]);
      } finally {
        await sql`drop table if exists prep_probe`.execute(handle.db);
        await handle.close();
      }
    });

    it('keeps at most 200 named statements per connection, and none when prepare is off', async () => {
      const handle = openPostgres({ url: test.url, poolMax: 1 });
      const plain = openPostgres({ url: test.url, poolMax: 1, prepare: false });
      try {
        for (let i = 0; i < 210; i++) expect((await sql<{ n: number }>`select ${i}::int + ${sql.lit(i)} as n`.execute(handle.db)).rows[0]?.n).toBe(2 * i);
        expect((await prepared(handle.db)).length).toBe(200);
        for (let i = 0; i < 3; i++) await sql`select ${i}::int as n`.execute(plain.db);
        expect(await prepared(plain.db)).toEqual([]);
      } finally {
        await handle.close();
        await plain.close();
      }
    });
  });

  describe('an unreachable database', () => {
    it('is told apart from a failing query: refused, terminated and shutting-down connections, not bad SQL', async () => {
      const nowhere = openPostgres({ url: `postgres://postgres@127.0.0.1:${await freePort()}/x`, connectTimeoutMs: 1_000 });
      try {
        const refused = await nowhere.ping().then(() => undefined, (err: unknown) => err);
        expect(isDatabaseUnavailable(refused)).toBe(true);
      } finally {
        await nowhere.close();
      }
      const victim = openPostgres({ url: test.url, poolMax: 1 });
      try {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(victim.db);
        const slow = sql`select pg_sleep(5)`.execute(victim.db).then(() => undefined, (err: unknown) => err);
        await new Promise((r) => setTimeout(r, 100));
        await sql`select pg_terminate_backend(${rows[0]?.pid})`.execute(test.handle.db);
        expect(isDatabaseUnavailable(await slow)).toBe(true);
      } finally {
        await victim.close();
      }
      expect(isDatabaseUnavailable(Object.assign(new Error('the database system is shutting down'), { code: '57P03' }))).toBe(true);
      const bad = await sql`select * from no_such_table`.execute(test.handle.db).then(() => undefined, (err: unknown) => err);
      expect(isDatabaseUnavailable(bad)).toBe(false);
      expect(isDatabaseUnavailable(new Error('duplicate key'))).toBe(false);
    });
  });

  describe('concurrent migrateToLatest', () => {
    let empty: TestDatabase;
    beforeAll(async () => {
      empty = await createTestDatabase({ migrated: false });
    });
    afterAll(() => empty?.drop());

    it('applies each migration exactly once across two pools', async () => {
      const other = openPostgres({ url: empty.url });
      try {
        const [a, b] = await Promise.all([migrateToLatest(empty.handle.db), migrateToLatest(other.db)]);
        expect([...a.applied, ...b.applied]).toEqual(migrationNames());
        const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(other.db);
        expect(rows.map((r) => r.name)).toEqual(migrationNames());
      } finally {
        await other.close();
      }
    });
  });
});
