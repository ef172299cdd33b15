import { randomBytes } from 'node:crypto';
import { Errors } from '@agentry/errors';
import { announceChange, isPlatform, type ChannelAccount, type ChannelPlatformView, type Platform } from '@agentry/contracts';
import { accountFields, isPolicy, isSessionScope, POLICIES, SESSION_SCOPES } from '@agentry/channels';
import { listChannelAccounts, type ChannelAccountRecord, type JsonValue } from '@agentry/db';
import { ACCOUNT_SECRET_FIELDS } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { hashApiKey } from '../auth/passwords.js';

const SECRET_FIELDS: ReadonlySet<string> = new Set(ACCOUNT_SECRET_FIELDS);

/** Fields of the written form that are not settings (or are handled apart). */
const STRUCTURAL = new Set(['id', 'name', 'enabled', 'binding']);

/**
 * Names a client may not write: what the read form derives (`hasSecret`) and the record's own
 * columns. Stored as settings they would show up in the read form (mass assignment).
 */
const READ_ONLY = new Set(['has_secret', 'api_key_hash', 'secrets_sealed', 'file_hmac', 'platform', 'created_at', 'updated_at']);

/** The platform from a path parameter, or 404. */
export function requirePlatform(platform: string): Platform {
  if (!isPlatform(platform)) throw new Errors.NOT_FOUND(`channel platform "${platform}"`);
  return platform;
}

/** An account as read (camelCase): the spec's fields, then its other non-secret settings. */
export function accountView(a: ChannelAccountRecord): ChannelAccount {
  const s = a.settings;
  const str = (v: JsonValue | undefined) => (typeof v === 'string' ? v : '');
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'dm_policy' || k === 'group_policy' || k === 'app_id') continue;
    extra[camel(k)] = v;
  }
  // The settings first: a stored field can never stand in for one the server decides.
  return {
    ...extra,
    id: a.id,
    name: a.name,
    enabled: a.enabled,
    dmPolicy: str(s.dm_policy) || 'allow',
    groupPolicy: str(s.group_policy) || 'allow',
    appId: str(s.app_id),
    hasSecret: a.secretsSealed !== null || a.apiKeyHash !== null,
  };
}

/** `{enabled, accounts}` of one platform; the platform switch comes from the configuration file. */
export async function platformView(deps: GatewayDeps, platform: Platform): Promise<ChannelPlatformView> {
  const accounts = await listChannelAccounts(deps.db.db, platform);
  return {
    enabled: deps.config.current.channels[platform]?.enabled ?? true,
    accounts: Object.fromEntries(accounts.map((a) => [a.id, accountView(a)])),
  };
}

/**
 * Checks the written fields shared by every platform: policies, allow_from, session_scope,
 * field values (strings, numbers, booleans; arrays of strings for allow_from). Values null mean
 * "remove" on update.
 */
export function checkWrittenFields(platform: Platform, body: Record<string, unknown>): void {
  checkKnownFields(platform, body);
  for (const field of ['dm_policy', 'group_policy'] as const) {
    const v = body[field];
    if (v !== undefined && v !== null && !isPolicy(v)) throw new Errors.VALIDATION(`${field}: must be one of ${POLICIES.join(', ')} (got ${JSON.stringify(v)})`);
  }
  const scope = body.session_scope;
  if (scope !== undefined && scope !== null && !isSessionScope(scope)) {
    throw new Errors.VALIDATION(`session_scope: must be one of ${SESSION_SCOPES.join(', ')} (got ${JSON.stringify(scope)})`);
  }
  for (const [k, v] of Object.entries(body)) {
    if (READ_ONLY.has(k)) throw new Errors.VALIDATION(`${k}: read-only; it cannot be written`);
    if (STRUCTURAL.has(k) || v === null || v === undefined) continue;
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(k)) throw new Errors.VALIDATION(`${k}: field names are snake_case (letters, digits, _)`);
    // Its shape is the route schema's (Budget); only api accounts take it (checkKnownFields).
    if (k === 'budget') continue;
    if (k === 'allow_from') {
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || x.length === 0 || x.length > 256) || v.length > 10_000) {
        throw new Errors.VALIDATION('allow_from: must be an array of non-empty ids');
      }
      continue;
    }
    if (SECRET_FIELDS.has(k)) {
      if (typeof v !== 'string' || v.length === 0 || v.length > 8192) throw new Errors.VALIDATION(`${k}: must be a non-empty string`);
      continue;
    }
    const ok = (typeof v === 'string' && v.length <= 8192) || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
    if (!ok) throw new Errors.VALIDATION(`${k}: must be a string, number or boolean`);
  }
  if (typeof body.api_base === 'string' && !/^https?:\/\/[^\s]+$/.test(body.api_base)) {
    throw new Errors.VALIDATION('api_base: must be an http(s) URL');
  }
}

/** A field no adapter reads would be stored and ignored: refused, naming it and what is taken. */
function checkKnownFields(platform: Platform, body: Record<string, unknown>): void {
  const known = accountFields(platform);
  const unknown = Object.keys(body).filter((k) => !STRUCTURAL.has(k) && !READ_ONLY.has(k) && !known.includes(k));
  if (unknown.length === 0) return;
  const names = unknown.map((k) => `"${k}"`).join(', ');
  throw new Errors.VALIDATION(`${names}: not ${unknown.length === 1 ? 'a field' : 'fields'} of ${platform} accounts (they take ${[...STRUCTURAL, ...known].join(', ')})`);
}

/**
 * Merges written fields into an account's settings and secrets (null removes a field). An `api`
 * account's `api_key` is kept only as its lookup hash plus the sealed copy.
 */
export function mergeAccount(
  base: { settings: Record<string, JsonValue>; secrets: Record<string, string> },
  body: Record<string, unknown>,
): { settings: Record<string, JsonValue>; secrets: Record<string, string> } {
  const settings = { ...base.settings };
  const secrets = { ...base.secrets };
  for (const [k, v] of Object.entries(body)) {
    if (STRUCTURAL.has(k) || v === undefined) continue;
    const target: Record<string, unknown> = SECRET_FIELDS.has(k) ? secrets : settings;
    if (v === null) delete target[k];
    else target[k] = v;
  }
  return { settings, secrets };
}

/** Settings naming the host an account's platform calls (with its secrets) go to. */
const DESTINATION_FIELDS = ['api_base', 'oapi_base'] as const;

/**
 * The stored secrets an update keeps: none when it points the account at another host (a
 * changed or removed `api_base` or `oapi_base`), so that whoever may edit the account cannot
 * have its credentials sent to a host of their choosing; secrets in the same request are
 * meant for the new host and are merged afterwards as usual. `api` accounts call nothing out.
 */
export function secretsKeptOnUpdate(
  platform: Platform,
  settings: Record<string, JsonValue>,
  secrets: Record<string, string>,
  body: Record<string, unknown>,
): Record<string, string> {
  if (platform === 'api') return secrets;
  const moved = DESTINATION_FIELDS.some((k) => body[k] !== undefined && body[k] !== (settings[k] ?? null));
  return moved ? {} : secrets;
}

/** A fresh API key for an `api` account (same shape as user keys). */
export function newAccountApiKey(): string {
  return `sk-${randomBytes(32).toString('base64url')}`;
}

/** Every replica re-reads channel account `id` (all of them without one); see announceChange. */
export async function publishChannelsChange(deps: GatewayDeps, id?: string): Promise<void> {
  await announceChange(deps.bus.pubsub, deps.logger, 'channels', id ? [id] : undefined);
}

function camel(snake: string): string {
  return snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Platform rules the shared checks do not cover. */
export function checkPlatformFields(platform: Platform, body: Record<string, unknown>): void {
  if (platform === 'api' && body.api_key !== undefined && body.api_key !== null && (typeof body.api_key !== 'string' || body.api_key.length < 16)) {
    throw new Errors.VALIDATION('api_key: at least 16 characters');
  }
  // Clients send the key as "Authorization: Bearer <key>", whose token allows only these characters.
  if (platform === 'api' && typeof body.api_key === 'string' && !/^[A-Za-z0-9._~+/=-]+$/.test(body.api_key)) {
    throw new Errors.VALIDATION('api_key: letters, digits and . _ ~ + / = - only (it travels as a Bearer token)');
  }
  if (platform !== 'api' && body.api_key !== undefined) throw new Errors.VALIDATION(`api_key: only api accounts have one (this is ${platform})`);
}

/** The sealed secrets and the api key's lookup hash of a merged account, as stored. */
export function sealedSecrets(deps: GatewayDeps, platform: Platform, merged: { secrets: Record<string, string> }) {
  const apiKey = platform === 'api' ? merged.secrets.api_key : undefined;
  return {
    secretsSealed: Object.keys(merged.secrets).length > 0 ? deps.secrets.seal(JSON.stringify(merged.secrets)) : null,
    apiKeyHash: apiKey ? hashApiKey(apiKey) : null,
  };
}
