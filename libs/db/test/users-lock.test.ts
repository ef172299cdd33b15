import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, describeWithPostgres, waitFor, type TestDatabase } from '@agentry/testing';
import { insertUser, lockEnabledAdmins, updateUser, type Db } from '../src/index.js';

/**
 * Two admins disabling each other at once: the second transaction must wait for the first and
 * then see its change, or both would see "another admin is left" and leave none.
 */
describeWithPostgres('lockEnabledAdmins (Postgres)', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase();
    for (const username of ['ann', 'ben']) await insertUser(test.handle.db, { username, passwordHash: 'x', role: 'admin' });
  });
  afterAll(() => test?.drop());

  const count = async (db: Db, query: ReturnType<typeof sql<{ n: number }>>) => (await query.execute(db)).rows[0]!.n;
  const rowLocksOnUsers = sql<{ n: number }>`select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'users' and l.mode = 'RowShareLock'`;
  const waitingOnLocks = sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;

  it('makes a concurrent check wait for the change in flight, then see it', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const first = test.handle.db.transaction().execute(async (trx) => {
      expect(await lockEnabledAdmins(trx)).toEqual(['ann', 'ben']);
      await updateUser(trx, 'ann', { disabled: true });
      await released;
    });
    let second: Promise<string[]> | undefined;
    try {
      await waitFor(async () => (await count(test.handle.db, rowLocksOnUsers)) > 0, 5000);
      second = test.handle.db.transaction().execute((trx) => lockEnabledAdmins(trx));
      // Blocked on the first's row locks, not merely not yet run.
      await waitFor(async () => (await count(test.handle.db, waitingOnLocks)) > 0, 5000);
    } finally {
      // Also on failure: an open transaction would hold up dropping the database.
      release();
    }
    await first;
    expect(await second).toEqual(['ben']);
  });
});
