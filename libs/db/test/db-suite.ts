import { sql, type Migration } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  MigrationError,
  appendMessages,
  clearSessions,
  deleteExpired,
  ensureSession,
  listSessionMessages,
  loadContext,
  saveCompaction,
  deleteSetting,
  finishRun,
  getRunSteps,
  listRunsOfAgent,
  recordRunSteps,
  insertRuleChain,
  insertRun,
  insertRunInSession,
  insertRunUsage,
  insertRunUsages,
  markRunStreamed,
  claimRun,
  claimRunOutsideSession,
  getRun,
  usageTotals,
  isForeignKeyViolation,
  isUniqueViolation,
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

    it('are checked with reads only when all are applied: no lock taken, no table made', async () => {
      const { db } = get();
      // The Migrator makes its lock table whenever it runs; a check that only reads leaves it gone.
      await sql`drop table kysely_migration_lock`.execute(db);
      expect(await migrateToLatest(db)).toEqual({ applied: [] });
      const { rows } = await sql<{ lock: string | null }>`select to_regclass('kysely_migration_lock')::text as lock`.execute(db);
      expect(rows[0]!.lock).toBeNull();
      // One pending migration goes to the Migrator again (which makes its lock table back).
      expect(await runMigrations(db, { ...migrations, '29991231T000000_later': { up: async () => undefined } })).toEqual({ applied: ['29991231T000000_later'] });
      await sql`delete from kysely_migration where name = '29991231T000000_later'`.execute(db);
      expect((await sql<{ lock: string | null }>`select to_regclass('kysely_migration_lock')::text as lock`.execute(db)).rows[0]!.lock).not.toBeNull();
    });

    it('refuse a database that applied a migration this code does not know', async () => {
      const { db } = get();
      await sql`insert into kysely_migration (name, timestamp) values ('29991231T000000_from_a_newer_version', '2999-12-31T00:00:00Z')`.execute(db);
      try {
        await expect(migrateToLatest(db)).rejects.toThrow(/29991231T000000_from_a_newer_version/);
      } finally {
        await sql`delete from kysely_migration where name = '29991231T000000_from_a_newer_version'`.execute(db);
      }
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

    it('creates a session and a run in it in one statement, and finds the same session the next time (as ensureSession)', async () => {
      const { db } = get();
      const agent = `insess-${Math.random().toString(36).slice(2, 8)}`;
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      const key = { agentId: agent, sessionKey: 'k1', channel: 'api', owner: 'user:ann' };
      const first = await insertRunInSession(db, key, { id: `${agent}-1`, source: 'api', request: { messages: [{ role: 'user', content: 'hi' }] }, replyTo: 'gw-1', principal: 'user:ann' });
      expect(first.run).toMatchObject({ id: `${agent}-1`, agentId: agent, sessionId: first.session.id, status: 'queued', replyTo: 'gw-1', principal: 'user:ann' });
      expect(first.run.request).toEqual({ messages: [{ role: 'user', content: 'hi' }] });
      expect(first.session).toMatchObject({ agentId: agent, sessionKey: 'k1', channel: 'api', scope: '', owner: 'user:ann', messageCount: 0, turnCount: 0 });
      expect(first.session.createdAt).toBeInstanceOf(Date);
      const second = await insertRunInSession(db, key, { id: `${agent}-2`, source: 'api', request: {} });
      expect(second.session).toEqual(first.session);
      expect(second.run).toMatchObject({ sessionId: first.session.id, replyTo: null, principal: '' });
      expect(second.run.seq).toBeGreaterThan(first.run.seq);
      expect(await ensureSession(db, key)).toEqual(first.session);
      // Another owner's key is another session.
      const other = await insertRunInSession(db, { ...key, owner: 'user:bob' }, { id: `${agent}-3`, source: 'api', request: {} });
      expect(other.session.id).not.toBe(first.session.id);
      // A run id taken already: nothing is created, the session included.
      await expect(insertRunInSession(db, { ...key, sessionKey: 'k2' }, { id: `${agent}-1`, source: 'api', request: {} })).rejects.toSatisfy(isUniqueViolation);
      expect(await db.selectFrom('sessions').select('id').where('agent_id', '=', agent).where('session_key', '=', 'k2').executeTakeFirst()).toBeUndefined();
    });

    it('a deferred commit stores the same run (alone or in a session) and leaves the connection synchronous afterwards', async () => {
      const { db } = get();
      const agent = `deferred-${Math.random().toString(36).slice(2, 8)}`;
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      const request = { messages: [{ role: 'user', content: 'hi' }], stream: true };
      const alone = await insertRun(db, { id: `${agent}-1`, agentId: agent, sessionId: null, source: 'api', request, replyTo: 'gw-1', principal: 'api:acct' }, { commit: 'deferred' });
      expect(alone).toMatchObject({ id: `${agent}-1`, agentId: agent, sessionId: null, status: 'queued', request, replyTo: 'gw-1', principal: 'api:acct', attempts: 0 });
      expect(await getRun(db, `${agent}-1`)).toEqual(alone);
      const key = { agentId: agent, sessionKey: 'k', channel: 'api', owner: 'user:ann' };
      const inSession = await insertRunInSession(db, key, { id: `${agent}-2`, source: 'api', request }, { commit: 'deferred' });
      expect(inSession.run).toMatchObject({ id: `${agent}-2`, sessionId: inSession.session.id });
      expect((await insertRunInSession(db, key, { id: `${agent}-3`, source: 'api', request: {} })).session.id).toBe(inSession.session.id);
      // set_config(..., true) is local to the statement's transaction: the next one commits synchronously again.
      await db.transaction().execute(async (trx) => {
        await insertRun(trx, { id: `${agent}-4`, agentId: agent, sessionId: null, source: 'api', request: {} }, { commit: 'deferred' });
        expect((await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(trx)).rows[0]?.s).toBe('off');
      });
      expect((await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(db)).rows[0]?.s).toBe('on');
    });

    it("stores a run's steps with its finish, lists runs with hasSteps only, and replaces steps only on a final run", async () => {
      const { db } = get();
      const agent = `steps-${Math.random().toString(36).slice(2, 8)}`;
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      for (const id of ['a', 'b', 'c']) await insertRun(db, { id: `${agent}-${id}`, agentId: agent, sessionId: null, source: 'api', request: { secret: 'asked' } });
      const steps: JsonValue[] = [{ nodeId: 'n1', type: 'jsTransform', relations: ['Success'], ms: 1.5, debug: { chainId: agent, in: { data: 'x' }, out: { data: 'X' } } }];
      // Before it is final, recordRunSteps writes nothing (only the finish carries the first steps).
      await recordRunSteps(db, `${agent}-a`, [{ nodeId: 'early' }]);
      expect((await getRunSteps(db, `${agent}-a`))?.steps).toBeNull();
      expect(await finishRun(db, `${agent}-a`, { status: 'succeeded', output: 'answered', steps })).toBe(true);
      await finishRun(db, `${agent}-b`, { status: 'failed', error: 'broke' });
      expect(await getRunSteps(db, `${agent}-a`)).toEqual({ agentId: agent, status: 'succeeded', principal: '', steps });
      expect((await getRunSteps(db, `${agent}-b`))?.steps).toBeNull();
      expect(await getRunSteps(db, 'no-such-run')).toBeUndefined();
      await recordRunSteps(db, `${agent}-a`, [...steps, { nodeId: 'n2', type: 'log', relations: ['Success'], ms: 0 }]);
      expect(((await getRunSteps(db, `${agent}-a`))?.steps as JsonValue[]).length).toBe(2);
      const page = await listRunsOfAgent(db, agent, { limit: 2, offset: 0 });
      expect(page.total).toBe(3);
      expect(page.rows.map((r) => [r.id, r.status, r.hasSteps])).toEqual([
        [`${agent}-c`, 'queued', false],
        [`${agent}-b`, 'failed', false],
      ]);
      const [last] = (await listRunsOfAgent(db, agent, { limit: 2, offset: 2 })).rows;
      expect(last).toMatchObject({ id: `${agent}-a`, hasSteps: true, error: null });
      expect(last!.finishedAt).toBeInstanceOf(Date);
      expect(Object.keys(last!)).not.toContain('request');
      // Of the request, only the start of its last user message: none here (no messages array).
      expect([...page.rows, last].map((r) => r!.asked)).toEqual([null, null, null]);
      await insertRun(db, { id: `${agent}-d`, agentId: agent, sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'first' }, { role: 'assistant', content: 'a' }, { role: 'user', content: 'x'.repeat(300) }] } });
      expect((await listRunsOfAgent(db, agent, { limit: 1, offset: 0 })).rows[0]!.asked).toBe('x'.repeat(120));
    });

    it('tells a foreign-key violation from a unique violation on the driver error (routes map them to 404/400 and 409)', async () => {
      const { db } = get();
      const agent = `fk-${Math.random().toString(36).slice(2, 8)}`;
      const caught = (p: Promise<unknown>) => p.then(() => expect.fail('the insert was accepted'), (err: unknown) => err);
      const missingAgent = await caught(insertRun(db, { id: `${agent}-orphan`, agentId: agent, sessionId: null, source: 'api', request: {} }));
      expect([isForeignKeyViolation(missingAgent), isUniqueViolation(missingAgent)]).toEqual([true, false]);
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      await insertRun(db, { id: `${agent}-run`, agentId: agent, sessionId: null, source: 'api', request: {} });
      const taken = await caught(insertRun(db, { id: `${agent}-run`, agentId: agent, sessionId: null, source: 'api', request: {} }));
      expect([isForeignKeyViolation(taken), isUniqueViolation(taken)]).toEqual([false, true]);
      expect([isForeignKeyViolation(null), isForeignKeyViolation(new Error('23503'))]).toEqual([false, false]);
    });
  });

  describe('session compaction', () => {
    it('a summary stands in for the messages it covers: marked, kept, left out of the context; the newest summary counts', async () => {
      const { db } = get();
      await insertRuleChain(db, { id: 'compact-agent', kind: 'agent', agentId: null, name: 'c', category: null, dsl: {} });
      const s = await ensureSession(db, { agentId: 'compact-agent', sessionKey: `k-${Date.now()}` });
      await appendMessages(db, s.id, 'r1', [1, 2, 3, 4, 5, 6].map((i) => ({ role: i % 2 ? ('user' as const) : ('assistant' as const), content: `m${i}` })));
      const before = await loadContext(db, s.id, 100);
      expect(before.summary).toBeNull();
      expect(before.messages.map((m) => m.content)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
      expect(await saveCompaction(db, s.id, 'first summary', before.messages[1]!.id)).toBe(2);
      expect(await saveCompaction(db, s.id, 'second summary', before.messages[3]!.id)).toBe(2);
      const after = await loadContext(db, s.id, 100);
      expect(after).toEqual({ summary: 'second summary', messages: before.messages.slice(4) });
      // The window counts only what is still sent.
      expect((await loadContext(db, s.id, 1)).messages.map((m) => m.content)).toEqual(['m6']);
      const all = await listSessionMessages(db, s.id);
      expect(all.map((m) => m.compactedAt instanceof Date)).toEqual([true, true, true, true, false, false]);
      await clearSessions(db, { agentId: 'compact-agent' });
      expect(await loadContext(db, s.id, 100)).toEqual({ summary: null, messages: [] });
    });
  });

  describe('retention', () => {
    it('deletes what expired in batches and keeps what is recent or in flight', async () => {
      const { db } = get();
      const a = `ret-${Math.random().toString(36).slice(2, 8)}`;
      const old = sql`now() - interval '40 days'`;
      await insertRuleChain(db, { id: a, kind: 'agent', agentId: null, name: a, category: null, dsl: {} });
      // Sessions: idle and expired; idle but with a recent run; idle with a run in flight; active.
      for (const [s, updated] of [['idle', old], ['revived', old], ['busy', old], ['active', sql`now()`]] as const) {
        await sql`insert into sessions (id, agent_id, session_key, updated_at) values (${`${a}-${s}`}, ${a}, ${s}, ${updated})`.execute(db);
        await sql`insert into session_messages (session_id, role, content) values (${`${a}-${s}`}, 'user', 'hi')`.execute(db);
      }
      const run = async (id: string, opts: { session?: string; status: string; finished?: unknown; created?: unknown }) => {
        await insertRun(db, { id: `${a}-${id}`, agentId: a, sessionId: opts.session ? `${a}-${opts.session}` : null, source: 'api', request: {} });
        await sql`update runs set status = ${opts.status}, finished_at = ${opts.finished ?? null}, created_at = ${opts.created ?? sql`now()`} where id = ${`${a}-${id}`}`.execute(db);
      };
      await run('idle-run', { session: 'idle', status: 'succeeded', finished: old, created: old });
      await run('revived-run', { session: 'revived', status: 'succeeded', finished: sql`now()` });
      await run('busy-run', { session: 'busy', status: 'running', created: old });
      for (let i = 0; i < 5; i++) await run(`old-${i}`, { status: i % 2 ? 'failed' : 'succeeded', finished: old, created: old });
      await run('old-queued', { status: 'queued', created: old });
      await run('recent', { status: 'succeeded', finished: sql`now() - interval '2 days'` });

      await sql`insert into cron_jobs (id, agent_id, name, schedule, message) values (${a}, ${a}, 'j', '* * * * *', 'm')`.execute(db);
      await sql`insert into cron_runs (cron_job_id, scheduled_at, status, finished_at) values
        (${a}, now() - interval '41 days', 'succeeded', ${old}), (${a}, now() - interval '40 days', 'running', null), (${a}, now(), 'failed', now())`.execute(db);
      for (const [id, status, finished] of [['o-sent', 'sent', old], ['o-queued', 'queued', null], ['o-new', 'failed', sql`now()`]] as const) {
        await sql`insert into outbound_messages (id, platform, account_id, chat_id, kind, payload, source, status, finished_at)
          values (${`${a}-${id}`}, 'chat_a', 'acct', 'c', 'text', '{}'::jsonb, 'api', ${status}, ${finished})`.execute(db);
      }
      await sql`insert into inbound_events (platform, account_id, event_id, received_at) values
        ('chat_a', ${a}, 'old', now() - interval '8 days'), ('chat_a', ${a}, 'new', now())`.execute(db);

      const cutoff = new Date(Date.now() - 30 * 24 * 3600 * 1000);
      const counts = await deleteExpired(db, { sessions: cutoff, runs: cutoff, cronRuns: cutoff, outbound: cutoff, inbound: new Date(Date.now() - 7 * 24 * 3600 * 1000) }, { batch: 2 });
      expect(counts).toEqual({ sessions: 1, runs: 5, cronRuns: 1, outbound: 1, inbound: 1 });

      const ids = async (table: 'runs' | 'sessions' | 'outbound_messages') =>
        (await sql<{ id: string }>`select id from ${sql.table(table)} where id like ${`${a}-%`} order by id`.execute(db)).rows.map((r) => r.id.slice(a.length + 1));
      // The idle session's run went with it (cascade), and its messages too.
      expect(await ids('sessions')).toEqual(['active', 'busy', 'revived']);
      expect(await ids('runs')).toEqual(['busy-run', 'old-queued', 'recent', 'revived-run']);
      expect(await ids('outbound_messages')).toEqual(['o-new', 'o-queued']);
      const left = await sql<{ n: number }>`select count(*)::int as n from session_messages where session_id like ${`${a}-%`}`.execute(db);
      expect(left.rows[0]!.n).toBe(3);
      const fires = await sql<{ status: string }>`select status from cron_runs where cron_job_id = ${a} order by scheduled_at`.execute(db);
      expect(fires.rows.map((r) => r.status)).toEqual(['running', 'failed']);
      const events = await sql<{ event_id: string }>`select event_id from inbound_events where account_id = ${a}`.execute(db);
      expect(events.rows.map((r) => r.event_id)).toEqual(['new']);

      // maxBatches spreads a backlog over passes; nothing is left to do after them.
      for (let i = 0; i < 3; i++) await run(`late-${i}`, { status: 'succeeded', finished: old, created: old });
      expect((await deleteExpired(db, { runs: cutoff }, { batch: 1, maxBatches: 2 })).runs).toBe(2);
      expect((await deleteExpired(db, { runs: cutoff }, { batch: 1, maxBatches: 2 })).runs).toBe(1);
      expect(await deleteExpired(db, {})).toEqual({ sessions: 0, runs: 0, cronRuns: 0, outbound: 0, inbound: 0 });
    });
  });

  describe('precompiled run statements (compiled once, run with each call\'s values)', () => {
    it('claims, marks and finishes each run with its own values, in every finish shape', async () => {
      const { db } = get();
      const agent = `pre-${Math.random().toString(36).slice(2, 8)}`;
      await insertRuleChain(db, { id: agent, kind: 'agent', agentId: null, name: agent, category: null, dsl: {} });
      const ids = ['a', 'b', 'c', 'd'].map((x) => `${agent}-${x}`);
      for (const id of ids) await insertRun(db, { id, agentId: agent, sessionId: null, source: 'api', request: { id } });
      const claimed = await claimRunOutsideSession(db, ids[0]!);
      expect(claimed).toMatchObject({ claimed: true, run: { id: ids[0], status: 'running', attempts: 1, request: { id: ids[0] } } });
      expect((await claimRun(db, ids[1]!))?.attempts).toBe(1);
      expect((await claimRun(db, ids[1]!))?.attempts).toBe(2);
      expect(await claimRunOutsideSession(db, `${agent}-none`)).toBeUndefined();
      await markRunStreamed(db, ids[0]!);
      const at = new Date('2026-01-02T03:04:05.678Z');
      expect(await finishRun(db, ids[0]!, { status: 'succeeded', output: 'one', usage: { total: 1 } })).toBe(true);
      expect(await finishRun(db, ids[1]!, { status: 'failed', error: 'two', finishedAt: at, streamed: true })).toBe(true);
      expect(await finishRun(db, ids[2]!, { status: 'cancelled', steps: [{ nodeId: 'n' }], finishedAt: at })).toBe(true);
      expect(await finishRun(db, ids[3]!, { status: 'succeeded', output: 'four', streamed: true, steps: [] })).toBe(true);
      // A run already final keeps its first outcome.
      expect(await finishRun(db, ids[0]!, { status: 'failed', error: 'late' })).toBe(false);
      const runs = await Promise.all(ids.map((id) => getRun(db, id)));
      expect(runs.map((r) => [r?.status, r?.output, r?.error, r?.usage, r?.streamed])).toEqual([
        ['succeeded', 'one', null, { total: 1 }, true],
        ['failed', null, 'two', null, true],
        ['cancelled', null, null, null, false],
        ['succeeded', 'four', null, null, true],
      ]);
      expect(runs[1]?.finishedAt?.toISOString()).toBe(at.toISOString());
      expect(runs[2]?.finishedAt?.toISOString()).toBe(at.toISOString());
      expect(runs[0]!.finishedAt!.getTime()).toBeGreaterThan(at.getTime());
      expect((await getRunSteps(db, ids[2]!))?.steps).toEqual([{ nodeId: 'n' }]);
      expect((await getRunSteps(db, ids[3]!))?.steps).toEqual([]);
      expect((await getRunSteps(db, ids[0]!))?.steps).toBeNull();
    });

    it('writes a batch of usage rows, each row with its own values, whatever the batch size', async () => {
      const { db } = get();
      await db.deleteFrom('run_usage').execute();
      await insertRuleChain(db, { id: 'batch-agent', kind: 'agent', agentId: null, name: 'b', category: null, dsl: {} });
      await insertRun(db, { id: 'batch-run', agentId: 'batch-agent', sessionId: null, source: 'api', request: {} });
      const row = (i: number) => ({ runId: 'batch-run', agentId: 'batch-agent', principal: `user:u${i}`, provider: `p${i}`, model: `m${i}`, promptTokens: i, completionTokens: 2 * i });
      // 3 rows, 3 again (the statement of 3 compiled once), then 40 (past the precompiled sizes).
      await insertRunUsages(db, [1, 2, 3].map(row));
      await insertRunUsages(db, [4, 5, 6].map(row));
      await insertRunUsages(db, Array.from({ length: 40 }, (_, i) => row(10 + i)));
      await insertRunUsages(db, [{ ...row(7), kind: 'compaction' }]);
      const rows = await db.selectFrom('run_usage').select(['principal', 'provider', 'model', 'prompt_tokens', 'completion_tokens', 'kind']).orderBy('prompt_tokens').execute();
      expect(rows).toHaveLength(47);
      for (const r of rows) {
        const i = Number(r.prompt_tokens);
        expect([r.principal, r.provider, r.model, Number(r.completion_tokens), r.kind]).toEqual([`user:u${i}`, `p${i}`, `m${i}`, 2 * i, i === 7 ? 'compaction' : 'chat']);
      }
    });
  });

  describe('usage repository', () => {
    it("stores a run's principal, and totals model calls by agent, principal, provider and UTC day over [from, to)", async () => {
      const { db } = get();
      await db.deleteFrom('run_usage').execute();
      await insertRuleChain(db, { id: 'usage-agent', kind: 'agent', agentId: null, name: 'u', category: null, dsl: {} });
      const run = await insertRun(db, { id: 'usage-run', agentId: 'usage-agent', sessionId: null, source: 'api', request: {}, principal: 'api:app' });
      expect(run.principal).toBe('api:app');
      expect((await getRun(db, 'usage-run'))?.principal).toBe('api:app');
      expect((await insertRun(db, { id: 'usage-run-2', agentId: 'usage-agent', sessionId: null, source: 'cron', request: {} })).principal).toBe('');
      const call = { runId: 'usage-run', agentId: 'usage-agent', principal: 'api:app', provider: 'p1', model: 'm' };
      await insertRunUsage(db, { ...call, promptTokens: 10, completionTokens: 4 });
      await insertRunUsage(db, { ...call, provider: 'p2', promptTokens: 1, completionTokens: -3 });
      await insertRunUsage(db, { ...call, principal: 'user:dave', promptTokens: 5_000_000_000, completionTokens: 1 });
      const from = new Date(Date.now() - 60_000);
      const to = new Date(Date.now() + 60_000);
      expect(await usageTotals(db, { groupBy: 'principal', from, to })).toEqual([
        { key: 'api:app', promptTokens: 11, completionTokens: 4, totalTokens: 15, requests: 2 },
        { key: 'user:dave', promptTokens: 5_000_000_000, completionTokens: 1, totalTokens: 5_000_000_001, requests: 1 },
      ]);
      expect((await usageTotals(db, { groupBy: 'provider', from, to, principal: 'api:app' })).map((r) => [r.key, r.totalTokens])).toEqual([
        ['p1', 14],
        ['p2', 1],
      ]);
      expect(await usageTotals(db, { groupBy: 'agent', from, to, principal: 'nobody' })).toEqual([]);
      const today = new Date().toISOString().slice(0, 10);
      expect((await usageTotals(db, { groupBy: 'day', from, to })).map((r) => [r.key, r.requests])).toEqual([[today, 3]]);
      // The window's end is exclusive, its start inclusive.
      expect(await usageTotals(db, { groupBy: 'agent', from: to, to: new Date(to.getTime() + 1) })).toEqual([]);
    });
  });
}
