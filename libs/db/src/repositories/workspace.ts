import { sql } from 'kysely';
import { Errors } from '@agentry/errors';
import type { Db } from '../handle.js';
import { inTransaction } from '../transaction.js';

/**
 * Agent workspaces: a virtual file tree per agent, one row per file or directory. Paths are
 * normalised by the caller (relative, `/`-separated, no `.`/`..`/empty segments; the root is
 * `''` and never stored). Operations that touch several rows run in one transaction (the
 * caller's, when it passes one).
 */

export interface WorkspaceEntry {
  path: string;
  name: string;
  isDir: boolean;
  /** Bytes of a file; 0 for a directory. */
  size: number;
  modTime: Date;
}

/**
 * Runs `fn` in a transaction (the caller's, when it passes one) that first locks the agent's row.
 * Every change to a workspace goes through here before it touches an entry, so all of them take
 * their locks in one order, the agent then its entries, and none can wait on another in a cycle
 * (the edit tool used to lock its file and then the agent for the quota, while a REST write
 * locked the agent and then waited for that file). Deleting the agent locks its row first too
 * (the entries go by cascade), so it waits for the writes under way. The quota's room is read
 * by one writer at a time. `FOR NO KEY UPDATE`: other tables' foreign-key checks on the agent
 * (runs, sessions) are not held up.
 */
export async function inWorkspaceTransaction<T>(db: Db, agentId: string, fn: (trx: Db) => Promise<T>): Promise<T> {
  return inTransaction(db, async (trx) => {
    await trx.selectFrom('rule_chains').select('id').where('id', '=', agentId).forNoKeyUpdate().executeTakeFirst();
    return fn(trx);
  });
}

function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

function ancestorsOf(path: string): string[] {
  const parts = path.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}

/** pg hands out Buffers, PGlite Uint8Arrays: callers always get a Buffer. */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

const META = ['path', 'is_dir', 'size', 'mod_time'] as const;

function toEntry(row: { path: string; is_dir: boolean; size: number; mod_time: Date }): WorkspaceEntry {
  return { path: row.path, name: row.path.slice(row.path.lastIndexOf('/') + 1), isDir: row.is_dir, size: Number(row.size), modTime: row.mod_time };
}

function inTree(path: string) {
  return sql<boolean>`(path = ${path}::text or starts_with(path, ${`${path}/`}::text))`;
}

export async function getWorkspaceEntry(db: Db, agentId: string, path: string): Promise<WorkspaceEntry | undefined> {
  const row = await db
    .selectFrom('workspace_entries')
    .select(META)
    .where('agent_id', '=', agentId)
    .where('path', '=', path)
    .executeTakeFirst();
  return row && toEntry(row);
}

/** A file with its bytes; undefined when there is no entry at `path` (a directory has no bytes). */
export async function readWorkspaceFile(
  db: Db,
  agentId: string,
  path: string,
): Promise<{ entry: WorkspaceEntry; content: Buffer | null } | undefined> {
  const row = await db
    .selectFrom('workspace_entries')
    .select([...META, 'content'])
    .where('agent_id', '=', agentId)
    .where('path', '=', path)
    .executeTakeFirst();
  if (!row) return undefined;
  return { entry: toEntry(row), content: row.is_dir ? null : toBuffer(row.content ?? new Uint8Array()) };
}

/** The entries directly inside a directory (`''` = root): directories first, then by name. */
export async function listWorkspaceDir(db: Db, agentId: string, dir: string): Promise<WorkspaceEntry[]> {
  const rows = await db
    .selectFrom('workspace_entries')
    .select(META)
    .where('agent_id', '=', agentId)
    .where('parent', '=', dir)
    .orderBy('is_dir', 'desc')
    .orderBy(sql`path collate "C"`)
    .execute();
  return rows.map(toEntry);
}

/** Creates the missing directories above `path`; 409 when one of them is a file. */
async function ensureParents(trx: Db, agentId: string, path: string): Promise<void> {
  const ancestors = ancestorsOf(path);
  if (ancestors.length === 0) return;
  const existing = await trx
    .selectFrom('workspace_entries')
    .select(['path', 'is_dir'])
    .where('agent_id', '=', agentId)
    .where('path', 'in', ancestors)
    .execute();
  const file = existing.find((e) => !e.is_dir);
  if (file) throw new Errors.CONFLICT(`"${file.path}" is a file, not a directory`);
  const have = new Set(existing.map((e) => e.path));
  const missing = ancestors.filter((a) => !have.has(a));
  if (missing.length === 0) return;
  await trx
    .insertInto('workspace_entries')
    .values(missing.map((p) => ({ agent_id: agentId, path: p, parent: parentOf(p), is_dir: true, content: null, size: 0 })))
    .onConflict((oc) => oc.columns(['agent_id', 'path']).doNothing())
    .execute();
}

/** Bytes of every file of an agent's workspace, but the one at `except`. */
export async function workspaceBytes(db: Db, agentId: string, except?: string): Promise<number> {
  let query = db
    .selectFrom('workspace_entries')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('size'), sql<number>`0`).as('n'))
    .where('agent_id', '=', agentId)
    .where('is_dir', '=', false);
  if (except !== undefined) query = query.where('path', '!=', except);
  const { n } = await query.executeTakeFirstOrThrow();
  return Number(n);
}

/**
 * Writes a file, creating the directories above it. `create` refuses an existing entry (409);
 * `overwrite` replaces an existing file but never a directory (409). `maxTotalBytes` (the
 * owner's `security.quotas.workspaceBytesPerAgent`) refuses a write that would leave the
 * workspace's files larger than that (409 `Limit reached: ...`).
 */
export async function writeWorkspaceFile(
  db: Db,
  agentId: string,
  path: string,
  content: Uint8Array,
  mode: 'create' | 'overwrite',
  opts: { maxTotalBytes?: number } = {},
): Promise<{ entry: WorkspaceEntry; created: boolean }> {
  return inWorkspaceTransaction(db, agentId, async (trx) => {
    if (opts.maxTotalBytes !== undefined) {
      // The agent's row is locked: parallel writes cannot each see room only one of them may take.
      const others = await workspaceBytes(trx, agentId, path);
      if (others + content.byteLength > opts.maxTotalBytes) {
        throw new Errors.QUOTA(
          `the workspace of agent "${agentId}" would hold ${others + content.byteLength} bytes of files (the limit is ${opts.maxTotalBytes}, security.quotas.workspaceBytesPerAgent): delete files first`,
        );
      }
    }
    await ensureParents(trx, agentId, path);
    const existing = await trx
      .selectFrom('workspace_entries')
      .select('is_dir')
      .where('agent_id', '=', agentId)
      .where('path', '=', path)
      .forUpdate()
      .executeTakeFirst();
    if (existing?.is_dir) throw new Errors.CONFLICT(`"${path}" is a directory`);
    if (existing && mode === 'create') throw new Errors.CONFLICT(`"${path}" already exists`);
    const values = { content, size: content.byteLength, mod_time: sql<Date>`now()` };
    const row = existing
      ? await trx
          .updateTable('workspace_entries')
          .set(values)
          .where('agent_id', '=', agentId)
          .where('path', '=', path)
          .returning(META)
          .executeTakeFirstOrThrow()
      : await trx
          .insertInto('workspace_entries')
          .values({ agent_id: agentId, path, parent: parentOf(path), is_dir: false, ...values })
          .returning(META)
          .executeTakeFirstOrThrow();
    return { entry: toEntry(row), created: !existing };
  });
}

/** Creates a directory and the ones above it; 409 when `path` exists. */
export async function makeWorkspaceDir(db: Db, agentId: string, path: string): Promise<WorkspaceEntry> {
  return inWorkspaceTransaction(db, agentId, async (trx) => {
    await ensureParents(trx, agentId, path);
    if (await getWorkspaceEntry(trx, agentId, path)) throw new Errors.CONFLICT(`"${path}" already exists`);
    const row = await trx
      .insertInto('workspace_entries')
      .values({ agent_id: agentId, path, parent: parentOf(path), is_dir: true, content: null, size: 0 })
      .returning(META)
      .executeTakeFirstOrThrow();
    return toEntry(row);
  });
}

/** Removes a file, or a directory with everything in it. Answers the number of entries removed. */
export async function deleteWorkspaceTree(db: Db, agentId: string, path: string): Promise<number> {
  const result = await inWorkspaceTransaction(db, agentId, (trx) => trx.deleteFrom('workspace_entries').where('agent_id', '=', agentId).where(inTree(path)).executeTakeFirst());
  return Number(result.numDeletedRows);
}

/**
 * Renames or moves an entry (a directory with its content), creating the directories above the
 * target. 404 when the source is missing, 409 when the target exists, 400 for a directory
 * moved into itself.
 */
export async function moveWorkspaceEntry(db: Db, agentId: string, from: string, to: string): Promise<WorkspaceEntry> {
  return inWorkspaceTransaction(db, agentId, async (trx) => {
    const source = await getWorkspaceEntry(trx, agentId, from);
    if (!source) throw new Errors.NOT_FOUND(`workspace entry "${from}"`);
    if (to === from) return source;
    if (to.startsWith(`${from}/`)) throw new Errors.VALIDATION(`cannot move "${from}" into itself`);
    if (await getWorkspaceEntry(trx, agentId, to)) throw new Errors.CONFLICT(`"${to}" already exists`);
    await ensureParents(trx, agentId, to);
    // SET expressions see the old row: `path` and `parent` below are the values before the move.
    await trx
      .updateTable('workspace_entries')
      .set({
        path: sql`${to}::text || substr(path, char_length(${from}::text) + 1)`,
        parent: sql`case when path = ${from}::text then ${parentOf(to)}::text else ${to}::text || substr(parent, char_length(${from}::text) + 1) end`,
      })
      .where('agent_id', '=', agentId)
      .where(inTree(from))
      .execute();
    const moved = await getWorkspaceEntry(trx, agentId, to);
    if (!moved) throw new Error(`workspace entry "${to}" missing after the move`);
    return moved;
  });
}
