import path from 'node:path';
import type { ApiError, LoginResult, Purpose } from '@agentry/client';
import { apiKeyFromConfig, findConfigFile, type ConfigApiKey } from './config-file.js';
import type { Prompter } from './prompt.js';
import type { CliSetup } from './setup.js';
import { CredentialStore, credentialsPath, type StoredLogin } from './store.js';

/**
 * Which credential a request carries. Sources, in the spec's order (Authentication, rule 8):
 *   1. env AGENTRY_API_KEY (the spec's SERVICE_API_KEY is an alias);
 *   2. the `api_key` of the first enabled account under `channels.api.accounts` of the config
 *      file (`--config`, AGENTRY_CONFIG, ./config.yaml);
 *   3. the JWT of `agentry login`, cached per server in ~/.config/agentry/credentials.json.
 * The first one found is "the credential in use" and signs chat requests. The server accepts
 * only a JWT on management routes (when it requires authentication) and on the account routes
 * (API key, password), so those carry the cached login whenever there is one, whatever stands
 * before it. A cached login the server refuses (expired or revoked) is renewed by asking for
 * the password again, once, and the request is retried.
 */

export type ApiKeyCredential =
  | { kind: 'apiKey'; token: string; source: 'env'; variable: 'AGENTRY_API_KEY' | 'SERVICE_API_KEY' }
  | ({ kind: 'apiKey'; token: string; source: 'config' } & Omit<ConfigApiKey, 'key'>);

export interface LoginCredential extends StoredLogin {
  kind: 'jwt';
  source: 'login';
  file: string;
}

export type Credential = ApiKeyCredential | LoginCredential;

/** One credential source as whoami lists it. */
export interface SourceReport {
  /** `env AGENTRY_API_KEY`, `config file ~/x.yaml (--config)`, `login cache ...`. */
  source: string;
  /** What it held, masked; null when it held nothing. */
  found: string | null;
  /** Whether it is the credential in use (the first found). */
  used: boolean;
  /** Why it could not be read, when it could not. */
  problem?: string;
}

/** `sk-...0001`: enough to recognise a key (its kind and last four), not enough to use it. */
export function maskSecret(secret: string): string {
  if (secret.length <= 12) return `${secret.slice(0, 2)}...`;
  const kind = /^[A-Za-z]{1,4}-/.exec(secret)?.[0] ?? secret.slice(0, 3);
  return `${kind}...${secret.slice(-4)}`;
}

/** Where a credential came from, in words (whoami, error hints). */
export function describeSource(c: Credential, home?: string): string {
  if (c.kind === 'jwt') return `the login cached in ${tilde(c.file, home)}`;
  if (c.source === 'env') return `env ${c.variable}`;
  if (c.entry === 'security.users') return `user "${c.accountId}" of security.users in ${tilde(c.file, home)} (${c.via})`;
  return `account "${c.accountId}" of channels.api in ${tilde(c.file, home)} (${c.via})`;
}

function tilde(file: string, home?: string): string {
  return home && file.startsWith(home + path.sep) ? `~${file.slice(home.length)}` : file;
}

export function isExpired(login: StoredLogin, now: number): boolean {
  const t = Date.parse(login.expireAt);
  return Number.isFinite(t) && t <= now;
}

export interface CredentialsOptions {
  setup: CliSetup;
  /** The server root the credentials are for. */
  url: string;
  /** `--config`, when given. */
  configOption?: string;
  prompter: Prompter;
  /** Logs in (no credential sent). */
  login: (username: string, password: string) => Promise<LoginResult>;
}

export class Credentials {
  readonly store: CredentialStore;
  #apiKey: ApiKeyCredential | null | undefined;
  #renewed = false;

  constructor(private readonly opts: CredentialsOptions) {
    this.store = new CredentialStore(credentialsPath(opts.setup.env, opts.setup.home));
  }

  get now(): number {
    return this.opts.setup.now?.() ?? Date.now();
  }

  /** Sources 1 and 2; the config file is read only when the environment has no key. */
  apiKey(): ApiKeyCredential | undefined {
    if (this.#apiKey === undefined) this.#apiKey = this.#findApiKey() ?? null;
    return this.#apiKey ?? undefined;
  }

  #findApiKey(): ApiKeyCredential | undefined {
    const env = this.opts.setup.env;
    for (const variable of ['AGENTRY_API_KEY', 'SERVICE_API_KEY'] as const) {
      const token = env[variable];
      if (token) return { kind: 'apiKey', token, source: 'env', variable };
    }
    const loc = findConfigFile(this.opts.configOption, env, this.opts.setup.cwd);
    const found = loc && apiKeyFromConfig(loc, env);
    if (!found) return undefined;
    const { key, ...where } = found;
    return { kind: 'apiKey', token: key, source: 'config', ...where };
  }

  /**
   * Every source, in order, as whoami shows it: what each one held and which one won (the
   * first found; a later one is "not used"). A source that cannot be read says why here
   * instead of failing, since it may not matter (an earlier one won).
   */
  survey(): SourceReport[] {
    const env = this.opts.setup.env;
    const home = this.opts.setup.home;
    const reports: SourceReport[] = [];
    const add = (source: string, found: string | null) => reports.push({ source, found, used: false });
    for (const variable of ['AGENTRY_API_KEY', 'SERVICE_API_KEY'] as const) add(`env ${variable}`, env[variable] ? `API key ${maskSecret(env[variable])}` : null);
    try {
      const loc = findConfigFile(this.opts.configOption, env, this.opts.setup.cwd);
      if (!loc) add('config file', null);
      else {
        const found = apiKeyFromConfig(loc, env);
        const where = found ? ` (${found.entry === 'channels.api' ? `account "${found.accountId}" of channels.api` : `user "${found.accountId}" of security.users`})` : '';
        add(`config file ${tilde(loc.file, home)} (${loc.via})`, found ? `API key ${maskSecret(found.key)}${where}` : null);
      }
    } catch (err) {
      add('config file', null);
      reports.at(-1)!.problem = (err as Error).message;
    }
    const login = this.login();
    add(`login cache ${tilde(this.store.file, home)}`, login ? `JWT of ${login.username}${isExpired(login, this.now) ? ' (expired)' : ''}` : null);
    const winner = reports.find((r) => r.found !== null);
    if (winner) winner.used = true;
    return reports;
  }

  /** Source 3: the cached login for this server. */
  login(): LoginCredential | undefined {
    const stored = this.store.get(this.opts.url);
    return stored && { kind: 'jwt', source: 'login', file: this.store.file, ...stored };
  }

  /** The first credential found, in the spec's order. */
  inUse(): Credential | undefined {
    return this.apiKey() ?? this.login();
  }

  /** The bearer token for a request (see the module comment). */
  tokenFor(purpose: Purpose): string | undefined {
    switch (purpose) {
      case 'public':
        return undefined;
      case 'chat':
        return this.inUse()?.token;
      case 'management':
        return this.login()?.token ?? this.apiKey()?.token;
      case 'account':
        return this.login()?.token;
    }
  }

  /** Keeps a login for this server. */
  save(username: string, result: LoginResult): void {
    this.store.set(this.opts.url, { username, token: result.token, expireAt: result.expireAt });
  }

  /**
   * A 401 on a request that carried the cached login: asks for the password again (once per
   * run), logs in, keeps and answers the new token. Undefined when there is nothing to renew.
   */
  async renew(_purpose: Purpose, error: ApiError, token: string): Promise<string | undefined> {
    const login = this.login();
    if (this.#renewed || !login || token !== login.token) return undefined;
    this.#renewed = true;
    const why = isExpired(login, this.now) ? 'has expired' : `was refused (${error.message})`;
    this.opts.setup.io.stderr.write(`the saved login of ${login.username} for ${this.opts.url} ${why}; log in again\n`);
    const password = await this.opts.prompter.secret(`password for ${login.username}: `);
    if (!password) return undefined;
    const result = await this.opts.login(login.username, password);
    this.save(login.username, result);
    return result.token;
  }
}
