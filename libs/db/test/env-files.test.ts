import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { withFileSecrets } from '../src/index.js';

describe('withFileSecrets (NAME_FILE variables, as compose secrets give them)', () => {
  let dir: string;
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, text);
    return p;
  };
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-env-files-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads each listed NAME_FILE into NAME, without the final newline, and leaves the input alone', () => {
    const env = {
      AGENTRY_SECRET_KEY_FILE: file('key', 'k'.repeat(40) + '\n'),
      AGENTRY_ADMIN_PASSWORD_FILE: file('admin', 'initial admin pw\r\n'),
      REDIS_URL_FILE: file('redis', 'redis://:pw@redis:6379'),
      OTHER: 'kept',
    };
    const out = withFileSecrets(env);
    expect(out).toMatchObject({ AGENTRY_SECRET_KEY: 'k'.repeat(40), AGENTRY_ADMIN_PASSWORD: 'initial admin pw', REDIS_URL: 'redis://:pw@redis:6379', OTHER: 'kept' });
    expect(env).not.toHaveProperty('AGENTRY_SECRET_KEY');
  });

  it('does not read a *_FILE variable that is not on the list', () => {
    expect(withFileSecrets({ SOMETHING_FILE: file('other', 'x') })).not.toHaveProperty('SOMETHING');
  });

  it('puts DATABASE_PASSWORD (from its file) into DATABASE_URL, encoded so that any character survives', () => {
    const password = 'p@ss:w/rd%#?& ü';
    const out = withFileSecrets({ DATABASE_URL: 'postgres://agentry@postgres:5432/agentry', DATABASE_PASSWORD_FILE: file('pg', `${password}\n`) });
    // As the driver reads it.
    const client = new pg.Client({ connectionString: out.DATABASE_URL! });
    expect({ user: client.user, password: client.password, host: client.host, port: client.port, database: client.database }).toEqual({ user: 'agentry', password, host: 'postgres', port: 5432, database: 'agentry' });
  });

  it('refuses ambiguity and unreadable files with a line that names the variable, never the secret', () => {
    const secret = file('secret', 'the-secret-value');
    expect(() => withFileSecrets({ AGENTRY_SECRET_KEY: 'a', AGENTRY_SECRET_KEY_FILE: secret })).toThrow('both AGENTRY_SECRET_KEY and AGENTRY_SECRET_KEY_FILE are set');
    expect(() => withFileSecrets({ DATABASE_URL: 'postgres://u:old@h/db', DATABASE_PASSWORD_FILE: secret })).toThrow(/DATABASE_URL has a password and DATABASE_PASSWORD is set/);
    expect(() => withFileSecrets({ DATABASE_PASSWORD_FILE: path.join(dir, 'missing') })).toThrow(/DATABASE_PASSWORD_FILE: cannot read .*missing \(ENOENT\)/);
    expect(() => withFileSecrets({ AGENTRY_SECRET_KEY_FILE: dir })).toThrow(/not a file/);
    expect(() => withFileSecrets({ AGENTRY_SECRET_KEY_FILE: file('empty', '\n') })).toThrow(/is empty/);
    expect(() => withFileSecrets({ AGENTRY_SECRET_KEY_FILE: file('big', 'x'.repeat(70 * 1024)) })).toThrow(/larger than/);
    try {
      withFileSecrets({ DATABASE_URL: 'not a url', DATABASE_PASSWORD_FILE: secret });
      expect.unreachable();
    } catch (err) {
      expect(String(err)).not.toContain('the-secret-value');
    }
  });
});
