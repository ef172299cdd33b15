import { AccountConfigError, type AccountContext } from './adapter.js';

/** A setting written as text, trimmed; undefined when absent, blank or not a string. */
export function textSetting(account: AccountContext, name: string): string | undefined {
  const value = account.settings[name];
  return typeof value === 'string' && value.trim() ? value.trim() : undefined;
}

/** Like textSetting, but a number counts too (as its decimal text): ids such as an AgentId may be written as JSON numbers. */
export function textOrNumberSetting(account: AccountContext, name: string): string | undefined {
  const value = account.settings[name];
  return typeof value === 'number' ? String(value) : textSetting(account, name);
}

/** `value`, or the AccountConfigError (answered 400) that `message` words when the account lacks it. */
export function requireField(value: string | undefined, message: string): string {
  if (!value) throw new AccountConfigError(message);
  return value;
}

/**
 * The base URL platform calls go to: the account's `api_base` when it has one (a proxy, another
 * region, a fake platform in tests), else the platform's own. `configured` is the setting as the
 * adapter reads it (some trim it first); anything but non-empty text counts as unset. Trailing
 * slashes are dropped so that paths can be appended as written.
 */
export function apiBase(configured: unknown, platformDefault: string): string {
  return (typeof configured === 'string' && configured ? configured : platformDefault).replace(/\/+$/, '');
}
