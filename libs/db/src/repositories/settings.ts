import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { JsonValue } from '../tables.js';

export interface Setting {
  key: string;
  value: JsonValue;
  updatedAt: Date;
}

function toJsonText(value: JsonValue): string {
  const text = JSON.stringify(value) as string | undefined;
  // JSON.stringify answers undefined for values the type forbids but a cast can smuggle in.
  if (text === undefined) throw new TypeError('setting value is not JSON-serialisable');
  return text;
}

/** The stored value, or undefined when the key is absent (a stored JSON null is `null`). */
export async function getSetting(db: Db, key: string): Promise<JsonValue | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row?.value;
}

/** Inserts or replaces; either way `updatedAt` becomes the transaction's time. */
export async function setSetting(db: Db, key: string, value: JsonValue): Promise<Setting> {
  const text = toJsonText(value);
  const row = await db
    .insertInto('settings')
    .values({ key, value: text })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => ({ value: eb.ref('excluded.value'), updated_at: sql<Date>`now()` })),
    )
    .returning(['key', 'value', 'updated_at'])
    .executeTakeFirstOrThrow();
  return { key: row.key, value: row.value, updatedAt: row.updated_at };
}

/** True when the key existed. */
export async function deleteSetting(db: Db, key: string): Promise<boolean> {
  const result = await db.deleteFrom('settings').where('key', '=', key).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * All settings, or those whose key starts with `prefix` (literally: no LIKE wildcards), ordered
 * by key bytewise so both engines agree whatever their default collation.
 */
export async function listSettings(db: Db, prefix?: string): Promise<Setting[]> {
  let query = db.selectFrom('settings').select(['key', 'value', 'updated_at']).orderBy(sql`key collate "C"`);
  if (prefix !== undefined && prefix !== '') {
    query = query.where(sql<boolean>`starts_with(${sql.ref('key')}, ${prefix})`);
  }
  const rows = await query.execute();
  return rows.map((row) => ({ key: row.key, value: row.value, updatedAt: row.updated_at }));
}

/** Stores `value` only when the key is absent; answers what is stored either way (first writer wins). */
export async function setSettingIfAbsent(db: Db, key: string, value: JsonValue): Promise<JsonValue> {
  await db
    .insertInto('settings')
    .values({ key, value: toJsonText(value) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const stored = await getSetting(db, key);
  if (stored === undefined) throw new Error(`setting ${key} vanished after insert`);
  return stored;
}
