import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { JsonValue } from '../tables.js';

export interface ChannelAccountRecord {
  platform: string;
  id: string;
  name: string;
  enabled: boolean;
  /** Non-secret settings (policies, app id, description, platform fields). */
  settings: Record<string, JsonValue>;
  /** AES-GCM sealed JSON object of the account's secret fields, or null. */
  secretsSealed: string | null;
  /** SHA-256 of the API key (platform `api` only), for lookups. */
  apiKeyHash: string | null;
  fileHmac: string | null;
}

const COLUMNS = ['platform', 'id', 'name', 'enabled', 'settings', 'secrets_sealed', 'api_key_hash', 'file_hmac'] as const;

type AccountRow = { platform: string; id: string; name: string; enabled: boolean; settings: JsonValue; secrets_sealed: string | null; api_key_hash: string | null; file_hmac: string | null };

function toRecord(r: AccountRow): ChannelAccountRecord {
  return {
    platform: r.platform,
    id: r.id,
    name: r.name,
    enabled: r.enabled,
    settings: (r.settings ?? {}) as Record<string, JsonValue>,
    secretsSealed: r.secrets_sealed,
    apiKeyHash: r.api_key_hash,
    fileHmac: r.file_hmac,
  };
}

function toRow(account: ChannelAccountRecord) {
  return {
    platform: account.platform,
    id: account.id,
    name: account.name,
    enabled: account.enabled,
    settings: JSON.stringify(account.settings),
    secrets_sealed: account.secretsSealed,
    api_key_hash: account.apiKeyHash,
    file_hmac: account.fileHmac,
  };
}

export async function listChannelAccounts(db: Db, platform?: string): Promise<ChannelAccountRecord[]> {
  let q = db.selectFrom('channel_accounts').select(COLUMNS).orderBy('platform').orderBy('id');
  if (platform) q = q.where('platform', '=', platform);
  return (await q.execute()).map(toRecord);
}

export async function upsertChannelAccount(db: Db, account: ChannelAccountRecord): Promise<void> {
  const values = toRow(account);
  await db
    .insertInto('channel_accounts')
    .values(values)
    .onConflict((oc) => oc.columns(['platform', 'id']).doUpdateSet({ ...values, updated_at: sql<Date>`now()` }))
    .execute();
}

export async function getChannelAccount(db: Db, platform: string, id: string): Promise<ChannelAccountRecord | undefined> {
  const row = await db.selectFrom('channel_accounts').select(COLUMNS).where('platform', '=', platform).where('id', '=', id).executeTakeFirst();
  return row ? toRecord(row) : undefined;
}

/** Inserts a new account; false when one with this id exists on the platform already. */
export async function insertChannelAccount(db: Db, account: ChannelAccountRecord): Promise<boolean> {
  const rows = await db
    .insertInto('channel_accounts')
    .values(toRow(account))
    .onConflict((oc) => oc.columns(['platform', 'id']).doNothing())
    .returning('id')
    .execute();
  return rows.length > 0;
}

/** Deletes an account; false when it did not exist. */
export async function deleteChannelAccount(db: Db, platform: string, id: string): Promise<boolean> {
  const rows = await db.deleteFrom('channel_accounts').where('platform', '=', platform).where('id', '=', id).returning('id').execute();
  return rows.length > 0;
}
