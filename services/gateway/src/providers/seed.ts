import type { Logger } from 'pino';
import { getProvider, upsertSeededProvider, type Db } from '@agentry/db';
import type { AgentryConfig, Sealer } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { publishProviderChange } from './store.js';

export interface ProviderSeedDeps {
  db: Db;
  secrets: Sealer;
  /** The configuration; `models.providers` is the file's (the API never changes it). */
  config: AgentryConfig;
  logger: Logger;
}

/**
 * Imports `models.providers` of the configuration file, with the users' rule: an entry is
 * imported when the provider is absent from the database or when the file's entry changed since
 * its last import (compared by a keyed HMAC); otherwise what the API changed stays. `force`
 * (`POST /config/models/reload`) imports every entry whatever changed. Providers not in the file
 * (made through the API) are never removed. A file entry without `api_key` keeps a key set
 * through the API. Answers the ids imported.
 */
export async function seedProviders(deps: ProviderSeedDeps, opts: { force?: boolean } = {}): Promise<string[]> {
  const { db, secrets, config, logger } = deps;
  const imported: string[] = [];
  for (const [id, p] of Object.entries(config.models.providers)) {
    const fileHmac = secrets.hmac(`provider:${id}:${stableJson(p)}`);
    const existing = await getProvider(db, id);
    if (!opts.force && existing?.fileHmac === fileHmac) continue;
    await upsertSeededProvider(db, {
      id,
      name: p.name ?? id,
      baseUrl: p.base_url,
      model: p.model ?? '',
      models: (p.models ?? []).map((m) => ({
        name: m.name,
        ...(m.alias ? { alias: m.alias } : {}),
        ...(m.context_window !== undefined ? { context_window: m.context_window } : {}),
      })),
      apiKeySealed: p.api_key ? secrets.seal(p.api_key) : null,
      fileHmac,
    });
    imported.push(id);
    logger.info({ provider: id }, existing ? 'model provider updated from the configuration file' : 'model provider created from the configuration file');
  }
  const defaultProvider = config.models.default_provider;
  if (defaultProvider && !(await getProvider(db, defaultProvider))) {
    logger.warn({ provider: defaultProvider }, 'models.default_provider names a provider that does not exist: agents without a provider cannot answer');
  }
  return imported;
}

/** Gateway start: seeds, then tells running workers to drop what they cached of re-imported providers. */
export async function seedProvidersAtStart(deps: GatewayDeps): Promise<void> {
  const imported = await seedProviders({ db: deps.db.db, secrets: deps.secrets, config: deps.config.current, logger: deps.logger });
  for (const id of imported) await publishProviderChange(deps, id);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
