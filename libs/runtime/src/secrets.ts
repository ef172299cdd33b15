import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Errors } from '@agentry/errors';

/**
 * Seals secrets at rest (user API keys, provider api keys, channel app secrets, the JWT signing
 * secret) with AES-256-GCM under the master key, so that a database dump alone reveals none of
 * them. Sealed text is `v1.<base64url(iv | ciphertext | tag)>`; the version leaves room to
 * rotate the scheme.
 */
export class Sealer {
  readonly #key: Buffer;
  readonly #macKey: Buffer;

  constructor(masterKey: string) {
    if (masterKey.length < 32) throw new Errors.CONFIG('AGENTRY_SECRET_KEY must be at least 32 characters');
    // Separate keys for encryption and for HMAC, both derived from the one master key.
    this.#key = createHash('sha256').update(`agentry:seal:${masterKey}`).digest();
    this.#macKey = createHash('sha256').update(`agentry:mac:${masterKey}`).digest();
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `v1.${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')}`;
  }

  open(sealed: string): string {
    if (!sealed.startsWith('v1.')) throw new Error('not a sealed secret');
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    if (raw.length < 28) throw new Error('sealed secret is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    try {
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
    } catch {
      throw new Error('cannot open a sealed secret: the master key (AGENTRY_SECRET_KEY) differs from the one that sealed it');
    }
  }

  /** A keyed fingerprint: equal inputs compare equal, and a dump cannot test guesses. */
  hmac(value: string): string {
    return createHmac('sha256', this.#macKey).update(value).digest('base64url');
  }
}

/**
 * The master key: `AGENTRY_SECRET_KEY`, else (embedded mode only) a key generated once into
 * `<data.root_dir>/secret.key` with 0600 permissions. Cluster services refuse to start without
 * the variable, since every replica must hold the same key.
 */
export function loadMasterKey(opts: { envKey: string | undefined; mode: 'embedded' | 'cluster'; rootDir: string }): string {
  if (opts.envKey) return opts.envKey;
  if (opts.mode === 'cluster') {
    throw new Errors.CONFIG('AGENTRY_SECRET_KEY is not set: cluster services need the master key that seals secrets (the same on every replica)');
  }
  const file = path.join(opts.rootDir, 'secret.key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Errors.CONFIG(`cannot read ${file}: ${(err as Error).message}`);
  }
  fs.mkdirSync(opts.rootDir, { recursive: true });
  const key = randomBytes(32).toString('base64url');
  try {
    // `wx`: if two processes race, one wins and the other reads the winner's key.
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw new Errors.CONFIG(`cannot write ${file}: ${(err as Error).message}`);
  }
}
