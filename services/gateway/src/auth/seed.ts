import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import {
  deleteUsersExcept,
  getRuleChain,
  getSetting,
  getUser,
  inLockedTransaction,
  inTransaction,
  replaceBindings,
  setSetting,
  listChannelAccounts,
  upsertChannelAccount,
  upsertSeededUser,
  type BindingRecord,
  type Db,
  type JsonValue,
} from '@agentry/db';
import { ACCOUNT_SECRET_FIELDS, PLATFORMS, type AgentryConfig, type Sealer } from '@agentry/runtime';
import { accountFields } from '@agentry/channels';
import type { Budget } from '@agentry/contracts';
import { DEFAULT_ADMIN_PASSWORD, hashApiKey, hashPassword } from './passwords.js';

/**
 * Imports users and channel accounts from the configuration file. An entry is imported when it
 * is absent from the database or when the file's entry changed since its last import (compared
 * by a keyed HMAC, so the database holds nothing that reveals the entry); otherwise what the API
 * changed (a password, a regenerated key) stays; a re-import replaces password and key but keeps
 * the role and `disabled` an admin set through the API. File users no longer in the file are
 * removed; users created through the API are not the file's to remove. With no user
 * configured, `admin` exists with the documented default password.
 */
export async function seedFromConfig(deps: { db: Db; secrets: Sealer; config: AgentryConfig; logger: Logger }): Promise<void> {
  const { db, secrets, config, logger } = deps;
  checkDuplicateKeys(config);

  const entries = Object.entries(config.security.users);
  const users = entries.length > 0 ? entries : [['admin', DEFAULT_ADMIN_PASSWORD] as [string, UserFileEntry]];
  // Gateways starting together would each re-import a user the other just imported, and each
  // import bumps the user's token version: a login on one gateway was then refused by the next.
  await inLockedTransaction(db, 'agentry:seed-users', (trx) => seedUsers(trx, secrets, users, entries.length > 0, logger));

  const stored = new Map((await listChannelAccounts(db)).map((a) => [`${a.platform}/${a.id}`, a]));
  for (const platform of PLATFORMS) {
    for (const [id, account] of Object.entries(config.channels[platform]?.accounts ?? {})) {
      const fileHmac = secrets.hmac(`account:${platform}:${id}:${stableJson(account)}`);
      if (stored.get(`${platform}/${id}`)?.fileHmac === fileHmac) continue;
      // The file is the operator's: a start is not refused over it, but a field nothing reads is named.
      const known = accountFields(platform);
      const unread = Object.keys(account).filter((k) => k !== 'name' && k !== 'enabled' && !known.includes(k));
      if (unread.length > 0) logger.warn({ platform, accountId: id, fields: unread }, `channels.${platform}.accounts.${id}: ${unread.join(', ')} ${unread.length === 1 ? 'is' : 'are'} not read by ${platform} accounts`);
      const settings: Record<string, JsonValue> = {};
      const sealed: Record<string, string> = {};
      for (const [k, v] of Object.entries(account)) {
        if (k === 'name' || k === 'enabled' || v === undefined) continue;
        if ((ACCOUNT_SECRET_FIELDS as readonly string[]).includes(k)) sealed[k] = String(v);
        else settings[k] = v as JsonValue;
      }
      await upsertChannelAccount(db, {
        platform,
        id,
        name: account.name ?? id,
        enabled: account.enabled ?? true,
        settings,
        secretsSealed: Object.keys(sealed).length > 0 ? secrets.seal(JSON.stringify(sealed)) : null,
        apiKeyHash: platform === 'api' && account.api_key ? hashApiKey(account.api_key) : null,
        fileHmac,
      });
      logger.info({ platform, accountId: id }, 'channel account imported from the configuration file');
    }
  }
  await seedBindings(deps);
}

/** Settings row remembering which `bindings` list of the file was imported last. */
const BINDINGS_HMAC_KEY = 'bindings.file_hmac';

/**
 * The file's `bindings` replace the stored list when the file's list changed since it was last
 * imported (so bindings edited through the API survive restarts with an unchanged file). An
 * entry naming an unknown agent, platform or account is skipped with a warning rather than
 * failing the start.
 */
async function seedBindings(deps: { db: Db; secrets: Sealer; config: AgentryConfig; logger: Logger }): Promise<void> {
  const { db, secrets, config, logger } = deps;
  const entries = config.bindings;
  if (entries === undefined) return;
  const fileHmac = secrets.hmac(`bindings:${stableJson(entries)}`);
  if ((await getSetting(db, BINDINGS_HMAC_KEY)) === fileHmac) return;
  const accounts = new Set((await listChannelAccounts(db)).map((a) => `${a.platform}/${a.id}`));
  const bindings: BindingRecord[] = [];
  for (const [i, e] of entries.entries()) {
    const where = `bindings[${i}]`;
    const agent = await getRuleChain(db, e.agent_id);
    if (!agent || agent.kind !== 'agent') {
      logger.warn({ binding: where, agentId: e.agent_id }, 'binding from the configuration file skipped: no such agent');
      continue;
    }
    const { channel, account_id: accountId } = e.match;
    if (channel !== undefined && !(PLATFORMS as readonly string[]).includes(channel)) {
      logger.warn({ binding: where, channel }, 'binding from the configuration file skipped: unknown platform');
      continue;
    }
    if (accountId !== undefined && (channel === undefined || !accounts.has(`${channel}/${accountId}`))) {
      logger.warn({ binding: where, channel, accountId }, 'binding from the configuration file skipped: no such account');
      continue;
    }
    if (channel === undefined && e.match.default !== true) {
      logger.warn({ binding: where }, 'binding from the configuration file skipped: match needs channel or default');
      continue;
    }
    bindings.push({
      agentId: e.agent_id,
      match: {
        ...(e.match.default ? { default: true } : {}),
        ...(channel !== undefined ? { channel } : {}),
        ...(accountId !== undefined ? { accountId } : {}),
      },
    });
  }
  const skipped = entries.length - bindings.length;
  await inTransaction(db, async (trx) => {
    await replaceBindings(trx, bindings);
    // With entries skipped (an agent not created yet), the next start imports the list again.
    if (skipped === 0) await setSetting(trx, BINDINGS_HMAC_KEY, fileHmac);
  });
  logger.info({ count: bindings.length, skipped }, 'bindings imported from the configuration file');
}

/** A `security.users` entry: the spec's string, or the object form that may carry a budget. */
type UserFileEntry = AgentryConfig['security']['users'][string];

/** `<password>` or `<password>:<API_KEY>`, split at the first colon; or `{password, api_key, budget}`. */
export function splitUserEntry(username: string, entry: UserFileEntry): { password: string; apiKey?: string; budget?: Budget } {
  if (typeof entry !== 'string') {
    if (!entry.password) throw new Errors.CONFIG(`security.users.${username}: the password is empty`);
    return { password: entry.password, ...(entry.api_key ? { apiKey: entry.api_key } : {}), ...(entry.budget ? { budget: entry.budget } : {}) };
  }
  const colon = entry.indexOf(':');
  const password = colon < 0 ? entry : entry.slice(0, colon);
  const apiKey = colon < 0 ? undefined : entry.slice(colon + 1);
  if (!password) throw new Errors.CONFIG(`security.users.${username}: the password is empty`);
  if (apiKey !== undefined && apiKey.length < 16) {
    throw new Errors.CONFIG(`security.users.${username}: the API key after the colon must be at least 16 characters`);
  }
  return apiKey ? { password, apiKey } : { password };
}

function checkDuplicateKeys(config: AgentryConfig): void {
  const seen = new Map<string, string>();
  const add = (key: string | undefined, where: string) => {
    if (!key) return;
    const other = seen.get(key);
    if (other) throw new Errors.CONFIG(`${where}: the same API key is also set at ${other}`);
    seen.set(key, where);
  };
  for (const [username, entry] of Object.entries(config.security.users)) add(splitUserEntry(username, entry).apiKey, `security.users.${username}`);
  for (const [id, account] of Object.entries(config.channels.api?.accounts ?? {})) add(account.api_key, `channels.api.accounts.${id}.api_key`);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

async function seedUsers(trx: Db, secrets: Sealer, users: Array<[string, UserFileEntry]>, fromFile: boolean, logger: Logger): Promise<void> {
  for (const [username, entry] of users) {
    // A string entry keeps the HMAC it always had: upgrading re-imports nobody.
    const fileHmac = secrets.hmac(`user:${username}:${typeof entry === 'string' ? entry : stableJson(entry)}`);
    const existing = await getUser(trx, username);
    if (existing?.fileHmac === fileHmac) continue;
    const { password, apiKey, budget } = splitUserEntry(username, entry);
    await upsertSeededUser(trx, {
      username,
      passwordHash: await hashPassword(password),
      role: username === 'admin' ? 'admin' : 'user',
      fileHmac,
      apiKey: apiKey ? { hash: hashApiKey(apiKey), sealed: secrets.seal(apiKey) } : undefined,
      budget: budget ?? null,
    });
    // Without security.users there is no file entry: the default admin is the server's own.
    const source = fromFile ? 'from the configuration file' : 'with the default password (security.users is not set)';
    logger.info({ username }, `user ${existing ? 'updated' : 'created'} ${source}`);
  }
  const removed = await deleteUsersExcept(
    trx,
    users.map(([u]) => u),
  );
  if (removed.length > 0) logger.info({ removed }, 'users no longer in the configuration file removed');
}
