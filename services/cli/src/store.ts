import fs from 'node:fs';
import path from 'node:path';
import { CliError } from './errors.js';

/** A JWT from `agentry login`, kept per server. */
export interface StoredLogin {
  username: string;
  token: string;
  /** ISO 8601, as the server's login answered. */
  expireAt: string;
}

interface StoreFile {
  version: 1;
  /** Keyed by server root (`http://localhost:9527`). */
  servers: Record<string, StoredLogin>;
}

/** `$XDG_CONFIG_HOME/agentry/credentials.json`, else `~/.config/agentry/credentials.json`. */
export function credentialsPath(env: Readonly<Record<string, string | undefined>>, home: string): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(home, '.config');
  return path.join(base, 'agentry', 'credentials.json');
}

function isLogin(v: unknown): v is StoredLogin {
  const l = v as StoredLogin | null;
  return typeof l?.username === 'string' && typeof l.token === 'string' && typeof l.expireAt === 'string';
}

/**
 * The login cache: one JSON file, mode 0600 in a 0700 directory, written whole to a temporary
 * file and renamed, so a crash never leaves half a file and no other user can read a token.
 */
export class CredentialStore {
  constructor(readonly file: string) {}

  #read(): StoreFile {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, servers: {} };
      throw new CliError(`cannot read ${this.file}: ${(err as Error).message}`);
    }
    try {
      const parsed = JSON.parse(text) as Partial<StoreFile>;
      const servers: Record<string, StoredLogin> = {};
      for (const [url, login] of Object.entries(parsed.servers ?? {})) if (isLogin(login)) servers[url] = login;
      return { version: 1, servers };
    } catch {
      throw new CliError(`${this.file} is not valid JSON; delete it and log in again`);
    }
  }

  #write(data: StoreFile): void {
    const dir = path.dirname(this.file);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
    fs.chmodSync(tmp, 0o600);
    fs.renameSync(tmp, this.file);
  }

  get(url: string): StoredLogin | undefined {
    return this.#read().servers[url];
  }

  all(): Record<string, StoredLogin> {
    return this.#read().servers;
  }

  set(url: string, login: StoredLogin): void {
    const data = this.#read();
    data.servers[url] = { username: login.username, token: login.token, expireAt: login.expireAt };
    this.#write(data);
  }

  /** True when there was a login to remove. */
  delete(url: string): boolean {
    const data = this.#read();
    if (!(url in data.servers)) return false;
    delete data.servers[url];
    this.#write(data);
    return true;
  }

  /** Removes every login; true when there was one. */
  clear(): boolean {
    const data = this.#read();
    if (Object.keys(data.servers).length === 0) return false;
    this.#write({ version: 1, servers: {} });
    return true;
  }
}
