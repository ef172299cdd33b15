import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { deleteRuleChain, deleteWorkspaceTree, getWorkspaceEntry, insertRuleChain, moveWorkspaceEntry, workspaceBytes, writeWorkspaceFile, type Db } from '@agentry/db';
import { createTestDatabase, describeWithPostgres, waitFor, type TestDatabase } from '@agentry/testing';
import { modifyFile } from '../src/tools/builtin/common.js';

/**
 * Workspace writes under `security.quotas.workspaceBytesPerAgent` lock the agent's row; every
 * change to a workspace takes that lock before any entry's (issue 35). Before, the edit and
 * write tools locked their file and then the agent, while a REST write (and deleting the agent)
 * locked the agent and then the file: Postgres found a deadlock and failed one of them. Real
 * Postgres, real row locks: two transactions at once, the second seen waiting on a lock.
 */
describeWithPostgres('workspace lock order (Postgres)', () => {
  let test: TestDatabase;
  let db: Db;
  const QUOTA = { maxTotalBytes: 1000 };
  const agent = (id: string) => insertRuleChain(db, { id, kind: 'agent', agentId: null, name: id, category: null, dsl: { ruleChain: { id, name: id } }, owner: 'alice' });
  const text = async (agentId: string, path: string) => {
    const row = await db.selectFrom('workspace_entries').select('content').where('agent_id', '=', agentId).where('path', '=', path).executeTakeFirst();
    return row ? Buffer.from(row.content ?? new Uint8Array()).toString('utf8') : undefined;
  };
  const waitingOnLocks = async () =>
    (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(db)).rows[0]!.n;

  beforeAll(async () => {
    test = await createTestDatabase();
    db = test.handle.db;
  });
  afterAll(() => test?.drop());

  /**
   * The edit tool's read-modify-write of `path` (quota on), paused inside its transaction until
   * `other` has started and is seen waiting on a lock; then both must finish.
   */
  async function editWhile(agentId: string, path: string, other: () => Promise<unknown>): Promise<PromiseSettledResult<unknown>[]> {
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const edit = modifyFile(
      db,
      agentId,
      path,
      async (current) => {
        entered();
        await released;
        return { bytes: Buffer.from(`${current?.toString('utf8') ?? ''}+edit`), result: undefined };
      },
      (trx, bytes) => writeWorkspaceFile(trx, agentId, path, bytes, 'overwrite', QUOTA),
    );
    let second: Promise<unknown> | undefined;
    try {
      await inside;
      second = other();
      await waitFor(async () => (await waitingOnLocks()) > 0, 10_000);
    } finally {
      // Also on failure: an open transaction would hold up dropping the database.
      release();
    }
    return Promise.allSettled([edit, second!]);
  }

  it('an edit and a REST write of the same file under the quota both finish, one after the other', async () => {
    await agent('lk_same');
    await writeWorkspaceFile(db, 'lk_same', 'notes.md', Buffer.from('v1'), 'create', QUOTA);
    const results = await editWhile('lk_same', 'notes.md', () => writeWorkspaceFile(db, 'lk_same', 'notes.md', Buffer.from('rest'), 'overwrite', QUOTA));
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    // The REST write waited for the edit, and came last.
    expect(await text('lk_same', 'notes.md')).toBe('rest');
  });

  it('deleting the agent while its file is being edited waits for the edit, then removes everything', async () => {
    await agent('lk_gone');
    await writeWorkspaceFile(db, 'lk_gone', 'AGENTS.md', Buffer.from('be kind'), 'create', QUOTA);
    const results = await editWhile('lk_gone', 'AGENTS.md', () => deleteRuleChain(db, 'lk_gone'));
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    expect(await getWorkspaceEntry(db, 'lk_gone', 'AGENTS.md')).toBeUndefined();
  });

  it('deleting a folder while a file in it is being edited: both finish', async () => {
    await agent('lk_tree');
    await writeWorkspaceFile(db, 'lk_tree', 'docs/a.md', Buffer.from('a'), 'create', QUOTA);
    await writeWorkspaceFile(db, 'lk_tree', 'docs/b.md', Buffer.from('b'), 'create', QUOTA);
    const results = await editWhile('lk_tree', 'docs/b.md', () => deleteWorkspaceTree(db, 'lk_tree', 'docs'));
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
    expect(await getWorkspaceEntry(db, 'lk_tree', 'docs/b.md')).toBeUndefined();
  });

  it('many writers on two agents at once (edits, REST writes, moves, deletes): no deadlock, and each workspace stays under its quota', async () => {
    await agent('lk_one');
    await agent('lk_two');
    const ops: Array<() => Promise<unknown>> = [];
    for (let i = 0; i < 60; i++) {
      const agentId = i % 2 === 0 ? 'lk_one' : 'lk_two';
      const path = `f${i % 5}.txt`;
      const bytes = Buffer.from('x'.repeat(90 + (i % 7) * 10));
      switch (i % 4) {
        case 0:
          ops.push(() => writeWorkspaceFile(db, agentId, path, bytes, 'overwrite', QUOTA));
          break;
        case 1:
          ops.push(() => modifyFile(db, agentId, path, async (cur) => ({ bytes: Buffer.concat([cur ?? Buffer.alloc(0), bytes]), result: undefined }), (trx, b) => writeWorkspaceFile(trx, agentId, path, b, 'overwrite', QUOTA)));
          break;
        case 2:
          ops.push(() => moveWorkspaceEntry(db, agentId, path, `moved/${path}`).then(() => moveWorkspaceEntry(db, agentId, `moved/${path}`, path)));
          break;
        default:
          ops.push(() => deleteWorkspaceTree(db, agentId, `f${(i + 2) % 5}.txt`));
      }
    }
    const results = await Promise.allSettled(ops.map((op) => op()));
    const unexpected = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => String(r.reason))
      // What a workload like this may meet: the quota, a move of a file another op removed or moved.
      .filter((reason) => !/Limit reached|not found|already exists/i.test(reason));
    expect(unexpected).toEqual([]);
    expect(await workspaceBytes(db, 'lk_one')).toBeLessThanOrEqual(QUOTA.maxTotalBytes);
    expect(await workspaceBytes(db, 'lk_two')).toBeLessThanOrEqual(QUOTA.maxTotalBytes);
  });
});
