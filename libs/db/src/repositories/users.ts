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
  fileHmac: string | null;
}

const COLUMNS = ['username', 'password_hash', 'role', 'api_key_hash', 'api_key_sealed', 'token_version', 'file_hmac'] as const;

function toRecord(row: {
  username: string;
  password_hash: string;
  role: string;
  api_key_hash: string | null;
  api_key_sealed: string | null;
  token_version: number;
  file_hmac: string | null;
}): UserRecord {
  return {
    username: row.username,
    passwordHash: row.password_hash,
    role: row.role as Role,
    apiKeyHash: row.api_key_hash,
    apiKeySealed: row.api_key_sealed,
    tokenVersion: row.token_version,
    fileHmac: row.file_hmac,
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

/** Creates the user or replaces what the file seeds; the token version moves so old JWTs die. */
export async function upsertSeededUser(
  db: Db,
  user: { username: string; passwordHash: string; role: Role; fileHmac: string; apiKey?: { hash: string; sealed: string } },
): Promise<void> {
  const values = {
    username: user.username,
    password_hash: user.passwordHash,
    role: user.role,
    file_hmac: user.fileHmac,
    ...(user.apiKey ? { api_key_hash: user.apiKey.hash, api_key_sealed: user.apiKey.sealed } : {}),
  };
  await db
    .insertInto('users')
    .values(values)
    .onConflict((oc) =>
      oc.column('username').doUpdateSet({
        ...values,
        token_version: sql<number>`users.token_version + 1`,
        updated_at: sql<Date>`now()`,
      }),
    )
    .execute();
}

/** Removes every user not in `keep`; answers the removed names. */
export async function deleteUsersExcept(db: Db, keep: string[]): Promise<string[]> {
  let q = db.deleteFrom('users');
  if (keep.length > 0) q = q.where('username', 'not in', keep);
  const rows = await q.returning('username').execute();
  return rows.map((r) => r.username);
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
