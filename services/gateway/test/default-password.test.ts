import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertUser, setPassword, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { DEFAULT_ADMIN_PASSWORD, hasDefaultPassword, hashPassword } from '../src/auth/passwords.js';
import { startupBanner } from '../src/banner.js';

/**
 * The one default-password check (review finding: the banner and /auth/status each had a copy):
 * what it answers, and that the start-up banner says what it answers.
 */
let handle: DbHandle;

beforeAll(async () => {
  handle = await createTestPglite();
});

afterAll(async () => {
  await handle?.close();
});

function runtime(requireAuth: boolean) {
  return {
    config: { current: { server: { host: '127.0.0.1' }, security: { requireAuth } } },
    db: handle,
    loaded: { paths: { logsDir: '/tmp/agentry-logs' } },
  } as unknown as Parameters<typeof startupBanner>[0];
}

describe('hasDefaultPassword', () => {
  it('is true while a user still has the default password, false after a change and for a missing user', async () => {
    expect(await hasDefaultPassword(handle.db)).toBe(false);
    await insertUser(handle.db, { username: 'admin', passwordHash: await hashPassword(DEFAULT_ADMIN_PASSWORD), role: 'admin' });
    await insertUser(handle.db, { username: 'root', passwordHash: await hashPassword('a-long-password'), role: 'admin' });
    expect(await hasDefaultPassword(handle.db)).toBe(true);
    expect(await hasDefaultPassword(handle.db, 'root')).toBe(false);
    expect(await hasDefaultPassword(handle.db, 'nobody')).toBe(false);
    expect((await startupBanner(runtime(true), 9600)).join('\n')).toMatch(/admin still has the default password/);

    await setPassword(handle.db, 'admin', await hashPassword('a-much-longer-one'));
    expect(await hasDefaultPassword(handle.db)).toBe(false);
    const banner = (await startupBanner(runtime(true), 9600)).join('\n');
    expect(banner).not.toMatch(/default password/);
    expect(banner).toMatch(/Security: closed: management needs a login/);
  });
});
