import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, describeWithPostgres, waitFor, type TestDatabase } from '@agentry/testing';
import { appendBinding, insertRuleChain, listBindings } from '../src/index.js';

/**
 * Two channel accounts created at once, each with a binding: both appends read the same last
 * position, and the second insert failed on the position key (the gateway answered it as a
 * duplicate api key, 409). Found by the authority matrix in cluster mode. The second append must
 * wait for the first and take the next position.
 */
describeWithPostgres('appendBinding under concurrency (Postgres)', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase();
    for (const agent of ['one', 'two']) await insertRuleChain(test.handle.db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
  });
  afterAll(() => test?.drop());

  const waitingOnLocks = sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;

  it('two appends in flight together both land, one after the other', async () => {
    const db = test.handle.db;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let appended!: () => void;
    const firstAppended = new Promise<void>((resolve) => (appended = resolve));
    const first = db.transaction().execute(async (trx) => {
      await appendBinding(trx, { agentId: 'one', match: { channel: 'chat_d', accountId: 'a' } });
      appended();
      await released;
    });
    let second: Promise<unknown> | undefined;
    try {
      await firstAppended;
      second = db.transaction().execute((trx) => appendBinding(trx, { agentId: 'two', match: { channel: 'chat_d', accountId: 'b' } }));
      // The second is blocked behind the first (on its lock, or before the fix on its key).
      await waitFor(async () => (await waitingOnLocks.execute(db)).rows[0]!.n > 0, 5000);
    } finally {
      release();
    }
    await first;
    await second;
    expect((await listBindings(db)).map((b) => b.agentId)).toEqual(['one', 'two']);
  });
});
