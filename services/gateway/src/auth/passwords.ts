import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { getUser, type Db } from '@agentry/db';

/** The default administrator password when no user is configured (documented; change it). */
export const DEFAULT_ADMIN_PASSWORD = 'admin';
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

/** What is wrong with a new password (every route that sets one applies the same rule); undefined when nothing. */
export function newPasswordProblem(field: string, password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `${field} must be at least ${MIN_PASSWORD_LENGTH} characters`;
  if (password.length > MAX_PASSWORD_LENGTH) return `${field} must be at most ${MAX_PASSWORD_LENGTH} characters`;
  return undefined;
}

const PARAMS = { N: 16384, r: 8, p: 1 } as const;
const KEYLEN = 32;

function derive(password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, KEYLEN, { ...opts, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** `scrypt$N$r$p$salt$hash` (base64url), so parameters can rise later without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/**
 * Whether `username` (admin unless named) still has the documented default password; false for
 * no such user. The one check behind the start-up banner, its log warning and `GET /auth/status`.
 */
export async function hasDefaultPassword(db: Db, username = 'admin'): Promise<boolean> {
  const user = await getUser(db, username);
  return user ? verifyPassword(DEFAULT_ADMIN_PASSWORD, user.passwordHash) : false;
}

/** Verified against when the user does not exist, so both failures take the same time. */
let dummy: Promise<string> | undefined;
export function dummyHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'));
  return dummy;
}

/** `sk-` + 32 random bytes. */
export function generateApiKey(): string {
  return `sk-${randomBytes(32).toString('base64url')}`;
}

/** Keys are looked up by this hash; the key itself is only kept sealed. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}
