import fs from 'node:fs';
import path from 'node:path';
import { CliError } from './errors.js';
import { yaml } from './lazy.js';

/**
 * The server's configuration file, read for one thing: an API key (credential source 2): the
 * first enabled account's under `channels.api.accounts`, else the first `security.users` entry
 * of the form `"<password>:<API_KEY>"` (split at the first colon, as the server does). Found as the server finds it:
 * `--config`, else AGENTRY_CONFIG, else `./config.yaml` when present.
 *
 * `${NAME}` and `${NAME:-default}` are replaced from the environment with the server's rules
 * (libs/runtime/src/config.ts, reimplemented here because the CLI must not load the runtime):
 * an unset or empty NAME takes the default, `$${` is a literal `${`, and an unset NAME without
 * default is an error naming the key and the variable. Only the keys the CLI reads are
 * substituted, so a variable the server needs elsewhere in the file (a provider key, say)
 * does not have to be set where the CLI runs.
 */

export interface ConfigLocation {
  file: string;
  /** How it was found: `--config`, `AGENTRY_CONFIG` or `./config.yaml`. */
  via: '--config' | 'AGENTRY_CONFIG' | './config.yaml';
}

export function findConfigFile(option: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): ConfigLocation | null {
  const given = option ?? (env.AGENTRY_CONFIG || undefined);
  if (given !== undefined) {
    const via = option !== undefined ? '--config' : 'AGENTRY_CONFIG';
    const file = path.resolve(cwd, given);
    if (!fs.existsSync(file)) throw new CliError(`config file ${given} (${via}) does not exist`);
    return { file, via };
  }
  const local = path.resolve(cwd, 'config.yaml');
  return fs.existsSync(local) ? { file: local, via: './config.yaml' } : null;
}

const VAR = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `${NAME}`, `${NAME:-default}` and `$${` in one string value; `where` names the key in errors. */
export function substituteEnv(value: string, env: Readonly<Record<string, string | undefined>>, where: string): string {
  return value.replace(VAR, (match, name: string | undefined, fallback: string | undefined) => {
    if (match === '$${') return '${';
    const v = env[name!];
    if (v !== undefined && v !== '') return v;
    if (fallback !== undefined) return fallback;
    throw new CliError(`${where}: environment variable ${name} is not set`);
  });
}

export interface ConfigApiKey {
  key: string;
  /** The account id (channels.api) or the username (security.users). */
  accountId: string;
  /** Where in the file the key was. */
  entry: 'channels.api' | 'security.users';
  file: string;
  via: ConfigLocation['via'];
}

type Node = unknown;

function child(node: Node, key: string): Node {
  return node instanceof Map ? node.get(key) : undefined;
}

/** A YAML scalar after substitution, as the server's schema would convert it. */
function scalar(value: Node, env: Readonly<Record<string, string | undefined>>, where: string): unknown {
  return typeof value === 'string' ? substituteEnv(value, env, where) : value;
}

/** `enabled` is true unless it says false (the server's schema converts "false" and 0 too). */
function enabled(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'string') return !['false', '0', ''].includes(value.trim().toLowerCase());
  return true;
}

/** The file's YAML as maps in file order (`1`, `2` would sort in an object); a bad file names its line. */
function readConfig(loc: ConfigLocation): Node {
  const name = path.basename(loc.file);
  let text: string;
  try {
    text = fs.readFileSync(loc.file, 'utf8');
  } catch (err) {
    throw new CliError(`${name}: cannot read: ${(err as Error).message}`);
  }
  const doc = yaml().parseDocument(text);
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw new CliError(`${name}: bad YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${e.message.split('\n')[0]}`);
  }
  return doc.toJS({ mapAsMap: true }) as Node;
}

/** The key of the first enabled `channels.api` account (file order). */
function apiAccountKey(root: Node, env: Readonly<Record<string, string | undefined>>): { key: string; accountId: string } | null {
  const api = child(child(root, 'channels'), 'api');
  if (!enabled(scalar(child(api, 'enabled'), env, 'channels.api.enabled'))) return null;
  const accounts = child(api, 'accounts');
  if (!(accounts instanceof Map)) return null;
  for (const [id, account] of accounts) {
    const where = `channels.api.accounts.${String(id)}`;
    if (!enabled(scalar(child(account, 'enabled'), env, `${where}.enabled`))) continue;
    const key = scalar(child(account, 'api_key'), env, `${where}.api_key`);
    if (typeof key !== 'string' || key === '') continue;
    return { key, accountId: String(id) };
  }
  return null;
}

/** The key of the first `security.users` entry written `"<password>:<API_KEY>"`. */
function userEntryKey(root: Node, env: Readonly<Record<string, string | undefined>>): { key: string; accountId: string } | null {
  const users = child(child(root, 'security'), 'users');
  if (!(users instanceof Map)) return null;
  for (const [name, value] of users) {
    const entry = scalar(value, env, `security.users.${String(name)}`);
    if (typeof entry !== 'string') continue;
    const colon = entry.indexOf(':');
    const key = colon < 0 ? '' : entry.slice(colon + 1);
    if (key !== '') return { key, accountId: String(name) };
  }
  return null;
}

/** The API key the file offers (see the module comment), or null when it offers none. */
export function apiKeyFromConfig(loc: ConfigLocation, env: Readonly<Record<string, string | undefined>>): ConfigApiKey | null {
  const root = readConfig(loc);
  const account = apiAccountKey(root, env);
  if (account) return { ...account, entry: 'channels.api', file: loc.file, via: loc.via };
  const user = userEntryKey(root, env);
  return user && { ...user, entry: 'security.users', file: loc.file, via: loc.via };
}
