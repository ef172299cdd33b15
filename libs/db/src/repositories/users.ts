import { sql } from 'kysely';
import type { Db } from '../handle.js';

export type Role = 'admin' | 'user';

export interface UserRecord {
  username: string;
  passwordHash: string;
  role: Role;
  apiKeyHash: string | null;
  apiKeySealed: string | null;
  tokenVersion: number;
  /** Set when the configuration file seeded the user (its entry's keyed HMAC); null for users created through the API. */
  fileHmac: string | null;
  disabled: boolean;
  /** Tokens per UTC day and requests per minute it may spend; null: no budget. */
  budget: Budget | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A principal's budget; a limit left out (or 0) is no limit. */
export interface Budget {
  tokensPerDay?: number;
  requestsPerMinute?: number;
}

const COLUMNS = [
  'username',
  'password_hash',
  'role',
  'api_key_hash',
  'api_key_sealed',
  'token_version',
  'file_hmac',
  'disabled',
  'budget',
  'created_at',
  'updated_at',
] as const;

function toRecord(row: {
  username: string;
  password_hash: string;
  role: string;
  api_key_hash: string | null;
  api_key_sealed: string | null;
  token_version: number;
  file_hmac: string | null;
  disabled: boolean;
  budget: unknown;
  created_at: Date;
  updated_at: Date;
}): UserRecord {
  return {
    username: row.username,
    passwordHash: row.password_hash,
    role: row.role as Role,
    apiKeyHash: row.api_key_hash,
    apiKeySealed: row.api_key_sealed,
    tokenVersion: row.token_version,
    fileHmac: row.file_hmac,
    disabled: row.disabled,
    budget: (row.budget as Budget | null) ?? null,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export async function listUsers(db: Db): Promise<UserRecord[]> {
  const rows = await db.selectFrom('users').select(COLUMNS).orderBy('username').execute();
  return rows.map(toRecord);
}

export async function getUser(db: Db, username: string): Promise<UserRecord | undefined> {
  const row = await db.selectFrom('users').select(COLUMNS).where('username', '=', username).executeTakeFirst();
  return row && toRecord(row);
}

/**
 * Creates the user or replaces what the file seeds (password, key); the token version moves so
 * old JWTs die. The role is the file's only for a new user: once stored, an admin's change
 * through the API stands, as does `disabled`, which the file cannot express.
 */
export async function upsertSeededUser(
  db: Db,
  user: { username: string; passwordHash: string; role: Role; fileHmac: string; apiKey?: { hash: string; sealed: string }; budget?: Budget | null },
): Promise<void> {
  const values = {
    username: user.username,
    password_hash: user.passwordHash,
    file_hmac: user.fileHmac,
    // The file's budget replaces one set through the API only when the file's entry changed (as the password).
    ...(user.budget !== undefined ? { budget: user.budget === null ? null : JSON.stringify(user.budget) } : {}),
    ...(user.apiKey ? { api_key_hash: user.apiKey.hash, api_key_sealed: user.apiKey.sealed } : {}),
  };
  await db
    .insertInto('users')
    .values({ ...values, role: user.role })
    .onConflict((oc) =>
      oc.column('username').doUpdateSet({
        ...values,
        token_version: sql<number>`users.token_version + 1`,
        updated_at: sql<Date>`now()`,
      }),
    )
    .execute();
}

/**
 * Removes every file-seeded user not in `keep`; answers the removed names. Users created through
 * the API (no `file_hmac`) are not the file's to remove.
 */
export async function deleteUsersExcept(db: Db, keep: string[]): Promise<string[]> {
  let q = db.deleteFrom('users').where('file_hmac', 'is not', null);
  if (keep.length > 0) q = q.where('username', 'not in', keep);
  const rows = await q.returning('username').execute();
  const names = rows.map((r) => r.username);
  await releaseOwnership(db, names);
  return names;
}

/**
 * What deleted users owned passes to `admin` and their conversations go, so that a later user
 * of the same name inherits nothing. Call in the transaction that deletes them.
 */
async function releaseOwnership(db: Db, usernames: readonly string[]): Promise<void> {
  if (usernames.length === 0) return;
  await db.updateTable('rule_chains').set({ owner: 'admin' }).where('owner', 'in', usernames).execute();
  await db.updateTable('cron_jobs').set({ owner: 'admin' }).where('owner', 'in', usernames).execute();
  await db
    .deleteFrom('sessions')
    .where(
      'owner',
      'in',
      usernames.map((u) => `user:${u}`),
    )
    .execute();
}

/** New password hash; bumps the token version so that every older JWT of the user stops working. */
export async function setPassword(db: Db, username: string, passwordHash: string): Promise<number> {
  const row = await db
    .updateTable('users')
    .set({ password_hash: passwordHash, token_version: sql<number>`token_version + 1`, updated_at: sql<Date>`now()` })
    .where('username', '=', username)
    .returning('token_version')
    .executeTakeFirst();
  if (!row) throw new Error(`user ${username} does not exist`);
  return row.token_version;
}

export async function setApiKey(db: Db, username: string, apiKey: { hash: string; sealed: string }): Promise<boolean> {
  const result = await db
    .updateTable('users')
    .set({ api_key_hash: apiKey.hash, api_key_sealed: apiKey.sealed, updated_at: sql<Date>`now()` })
    .where('username', '=', username)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** A user created through the API; undefined when the name is taken. */
export async function insertUser(db: Db, user: { username: string; passwordHash: string; role: Role }): Promise<UserRecord | undefined> {
  const row = await db
    .insertInto('users')
    .values({ username: user.username, password_hash: user.passwordHash, role: user.role })
    .onConflict((oc) => oc.column('username').doNothing())
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toRecord(row);
}

export interface UserChange {
  role?: Role;
  disabled?: boolean;
  passwordHash?: string;
  /** null removes the budget. */
  budget?: Budget | null;
}

/**
 * Applies an admin's change; undefined when the user does not exist. A new password or a
 * disable bumps the token version (every JWT issued before stops working); a disable also drops
 * the API key, so re-enabling revives neither: the user logs in again and makes a new key.
 */
export async function updateUser(db: Db, username: string, change: UserChange): Promise<UserRecord | undefined> {
  const revoke = change.passwordHash !== undefined || change.disabled === true;
  const row = await db
    .updateTable('users')
    .set({
      ...(change.role !== undefined ? { role: change.role } : {}),
      ...(change.disabled !== undefined ? { disabled: change.disabled } : {}),
      ...(change.passwordHash !== undefined ? { password_hash: change.passwordHash } : {}),
      ...(change.budget !== undefined ? { budget: change.budget === null ? null : JSON.stringify(change.budget) } : {}),
      ...(change.disabled === true ? { api_key_hash: null, api_key_sealed: null } : {}),
      ...(revoke ? { token_version: sql<number>`token_version + 1` } : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('username', '=', username)
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toRecord(row);
}

export async function deleteUser(db: Db, username: string): Promise<boolean> {
  const result = await db.deleteFrom('users').where('username', '=', username).executeTakeFirst();
  const deleted = Number(result.numDeletedRows) > 0;
  if (deleted) await releaseOwnership(db, [username]);
  return deleted;
}

/**
 * Names of the enabled admins, their rows locked until the transaction ends: two admins
 * disabling each other at once cannot both see the other as the one left.
 */
export async function lockEnabledAdmins(trx: Db): Promise<string[]> {
  const rows = await trx.selectFrom('users').select('username').where('role', '=', 'admin').where('disabled', '=', false).forUpdate().execute();
  return rows.map((r) => r.username);
}
