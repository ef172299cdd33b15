import { sql } from 'kysely';
import type { Db } from '../handle.js';
import type { JsonValue } from '../tables.js';

/** One model a provider serves; alias `default` marks the provider's default model. */
export interface ProviderModel {
  name: string;
  alias?: string;
  context_window?: number;
}

export interface ProviderRecord {
  id: string;
  name: string;
  baseUrl: string;
  /** The default model name as written ('' when not set; see `models`). */
  model: string;
  models: ProviderModel[];
  /** AES-GCM sealed API key, or null when the provider has none. */
  apiKeySealed: string | null;
  /** Which configuration-file entry was imported last (null for providers made by the API). */
  fileHmac: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewProvider {
  id: string;
  name: string;
  baseUrl: string;
  model: string;
  models: ProviderModel[];
  apiKeySealed: string | null;
  fileHmac: string | null;
}

/** Fields an update may change; absent ones stay. */
export type ProviderChange = Partial<Pick<NewProvider, 'name' | 'baseUrl' | 'model' | 'models' | 'apiKeySealed'>>;

const COLUMNS = ['id', 'name', 'base_url', 'model', 'models', 'api_key_sealed', 'file_hmac', 'created_at', 'updated_at'] as const;

type Row = {
  id: string;
  name: string;
  base_url: string;
  model: string;
  models: JsonValue;
  api_key_sealed: string | null;
  file_hmac: string | null;
  created_at: Date;
  updated_at: Date;
};

function toRecord(row: Row): ProviderRecord {
  return {
    id: row.id,
    name: row.name,
    baseUrl: row.base_url,
    model: row.model,
    models: Array.isArray(row.models) ? (row.models as unknown as ProviderModel[]) : [],
    apiKeySealed: row.api_key_sealed,
    fileHmac: row.file_hmac,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Every provider, by id (bytewise, as on both engines). */
export async function listProviders(db: Db): Promise<ProviderRecord[]> {
  const rows = await db.selectFrom('model_providers').select(COLUMNS).orderBy(sql`id collate "C"`).execute();
  return rows.map(toRecord);
}

export async function getProvider(db: Db, id: string): Promise<ProviderRecord | undefined> {
  const row = await db.selectFrom('model_providers').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  return row && toRecord(row);
}

/** Inserts a provider. A taken id raises the driver's unique violation (see isUniqueViolation). */
export async function insertProvider(db: Db, p: NewProvider): Promise<ProviderRecord> {
  const row = await db
    .insertInto('model_providers')
    .values({
      id: p.id,
      name: p.name,
      base_url: p.baseUrl,
      model: p.model,
      models: JSON.stringify(p.models),
      api_key_sealed: p.apiKeySealed,
      file_hmac: p.fileHmac,
    })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
  return toRecord(row);
}

/**
 * What the configuration file seeds: creates the provider or replaces its fields with the file's.
 * A null `apiKeySealed` keeps the stored key (a file entry without `api_key` does not erase a
 * key set through the API), unless the file moves the provider to another `base_url`: a key is
 * meant for the host it was given with, never sent on to another one.
 */
export async function upsertSeededProvider(db: Db, p: NewProvider): Promise<void> {
  const values = {
    id: p.id,
    name: p.name,
    base_url: p.baseUrl,
    model: p.model,
    models: JSON.stringify(p.models),
    file_hmac: p.fileHmac,
    ...(p.apiKeySealed !== null ? { api_key_sealed: p.apiKeySealed } : {}),
  };
  await db
    .insertInto('model_providers')
    .values(values)
    .onConflict((oc) =>
      oc.column('id').doUpdateSet({
        ...values,
        ...(p.apiKeySealed === null ? { api_key_sealed: keyKeptOnlyAt(p.baseUrl) } : {}),
        updated_at: sql<Date>`now()`,
      }),
    )
    .execute();
}

/**
 * The stored key while `base_url` stays `baseUrl`, else null. Decided in the statement itself, so
 * that two concurrent changes cannot leave a key with a host it was not given for.
 */
function keyKeptOnlyAt(baseUrl: string) {
  return sql<string | null>`case when model_providers.base_url = ${baseUrl} then model_providers.api_key_sealed else null end`;
}

/**
 * Changes the given fields; undefined when the provider does not exist. A new `baseUrl` without
 * a new `apiKeySealed` clears the stored key: whoever can point the provider elsewhere must not
 * thereby receive its key (an unchanged `baseUrl` keeps it).
 */
export async function updateProvider(db: Db, id: string, change: ProviderChange): Promise<ProviderRecord | undefined> {
  const row = await db
    .updateTable('model_providers')
    .set({
      ...(change.name !== undefined ? { name: change.name } : {}),
      ...(change.baseUrl !== undefined ? { base_url: change.baseUrl } : {}),
      ...(change.model !== undefined ? { model: change.model } : {}),
      ...(change.models !== undefined ? { models: JSON.stringify(change.models) } : {}),
      ...(change.apiKeySealed !== undefined
        ? { api_key_sealed: change.apiKeySealed }
        : change.baseUrl !== undefined
          ? { api_key_sealed: keyKeptOnlyAt(change.baseUrl) }
          : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .returning(COLUMNS)
    .executeTakeFirst();
  return row && toRecord(row);
}

export async function deleteProvider(db: Db, id: string): Promise<boolean> {
  const result = await db.deleteFrom('model_providers').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * The chains (agents and rule chains) with an `ai/agent` or `ai/llm` node that names the
 * provider, as its `provider` or in its `failover` list. Nodes that name none use the default
 * provider and are not listed. Scans the DSLs in TypeScript: the DSL is a `json` column.
 */
export async function chainsUsingProvider(db: Db, providerId: string): Promise<Array<{ id: string; kind: 'agent' | 'rule' }>> {
  const rows = await db.selectFrom('rule_chains').select(['id', 'kind', 'dsl']).orderBy(sql`id collate "C"`).execute();
  return rows.filter((r) => dslUsesProvider(r.dsl, providerId)).map((r) => ({ id: r.id, kind: r.kind }));
}

function dslUsesProvider(dsl: JsonValue, providerId: string): boolean {
  const nodes = (dsl as { metadata?: { nodes?: unknown } } | null)?.metadata?.nodes;
  if (!Array.isArray(nodes)) return false;
  return nodes.some((node: unknown) => {
    const n = node as { type?: unknown; configuration?: { provider?: unknown; failover?: unknown } } | null;
    if (!n || (n.type !== 'ai/agent' && n.type !== 'ai/llm')) return false;
    const c = n.configuration;
    if (!c || typeof c !== 'object') return false;
    if (c.provider === providerId) return true;
    return Array.isArray(c.failover) && c.failover.some((f: unknown) => (f as { provider?: unknown } | null)?.provider === providerId);
  });
}
