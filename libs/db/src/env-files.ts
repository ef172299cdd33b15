import fs from 'node:fs';
import { Errors } from '@agentry/errors';

/**
 * Variables that may come from a file instead: `NAME_FILE=/run/secrets/x` gives NAME the file's
 * content (Docker and compose `secrets:`, Kubernetes Secret volumes). The secret then never sits
 * in the container's configuration, where `docker inspect` shows every variable to anyone with
 * the socket. A fixed list: an arbitrary `*_FILE` is not read, so that no variable can make a
 * service read a file it was not meant to.
 */
export const FILE_SECRET_VARIABLES = ['AGENTRY_SECRET_KEY', 'DATABASE_URL', 'DATABASE_PASSWORD', 'REDIS_URL', 'AGENTRY_ADMIN_PASSWORD'] as const;

/** Larger than any secret; a path pointing at something else fails rather than filling memory. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

function readSecretFile(name: string, file: string): string {
  let text: string;
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) throw new Error('not a file');
    if (stat.size > MAX_SECRET_FILE_BYTES) throw new Error(`larger than ${MAX_SECRET_FILE_BYTES} bytes`);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    // The path is configuration, not the secret: naming it tells the operator what to fix.
    throw new Errors.CONFIG(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  // Editors and `echo` end files with a newline; a secret never does.
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new Errors.CONFIG(`${name}_FILE: ${file} is empty`);
  return value;
}

/**
 * The environment with every `NAME_FILE` of FILE_SECRET_VARIABLES read into NAME, and
 * DATABASE_PASSWORD put into DATABASE_URL (encoded, so any password works in the URL). A new
 * object: process.env is not changed, so child processes (the `bash` tool) do not inherit the
 * secrets read here. Throws a CONFIG error when both NAME and NAME_FILE are set or a file cannot
 * be read.
 */
export function withFileSecrets(env: Readonly<Record<string, string | undefined>>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env };
  for (const name of FILE_SECRET_VARIABLES) {
    const file = env[`${name}_FILE`];
    if (!file) continue;
    if (env[name]) throw new Errors.CONFIG(`both ${name} and ${name}_FILE are set: keep one`);
    out[name] = readSecretFile(name, file);
  }
  const password = out.DATABASE_PASSWORD;
  if (password && out.DATABASE_URL) out.DATABASE_URL = urlWithPassword(out.DATABASE_URL, password);
  return out;
}

function urlWithPassword(databaseUrl: string, password: string): string {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new Errors.CONFIG('DATABASE_URL is not a URL (postgres://user@host:5432/db)');
  }
  if (url.password) throw new Errors.CONFIG('DATABASE_URL has a password and DATABASE_PASSWORD is set too: keep one');
  url.password = encodeURIComponent(password);
  return url.toString();
}
