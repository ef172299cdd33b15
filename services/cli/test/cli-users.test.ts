import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startGateway, tempHome, type CliOptions, type TestGateway } from './support.js';

/**
 * `agentry users ...` of the real bin against a real gateway that requires authentication: an
 * admin manages users, and what it does shows in what those users can do with their own logins.
 */
let gw: TestGateway;
const homes: string[] = [];
let admin: string;
const ADMIN_PASSWORD = 'admin-password-for-cli-users';

const newHome = () => {
  const home = tempHome();
  homes.push(home);
  return home;
};
const cli = (args: string[], home: string, opts: CliOptions = {}) => runCli(args, home, gw.url, opts);

beforeAll(async () => {
  gw = await startGateway({ config: ['security:', '  requireAuth: true', '  users:', `    admin: "${ADMIN_PASSWORD}"`] });
  admin = newHome();
  const login = await cli(['login', '-u', 'admin'], admin, { input: `${ADMIN_PASSWORD}\n` });
  expect(login.code, login.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  for (const home of homes) fs.rmSync(home, { recursive: true, force: true });
});

describe('agentry users', () => {
  it('create (password from stdin), list, set-role, and a user-role login is refused', async () => {
    const created = await cli(['users', 'create', 'alice'], admin, { input: 'alice-password\n' });
    expect(created.code, created.stderr).toBe(0);
    expect(created.json()).toMatchObject({ username: 'alice', role: 'user', disabled: false, source: 'api' });

    const list = await cli(['users', 'list'], admin);
    expect(list.json<Array<{ username: string }>>().map((u) => u.username)).toEqual(['admin', 'alice']);
    expect(list.stdout).not.toMatch(/alice-password|scrypt/);

    const alice = newHome();
    expect((await cli(['login', '-u', 'alice'], alice, { input: 'alice-password\n' })).code).toBe(0);
    const refused = await cli(['users', 'list'], alice);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error: Not allowed: only an admin may read \/api\/v1\/users/);

    expect((await cli(['users', 'set-role', 'alice', 'admin'], admin)).json()).toMatchObject({ role: 'admin' });
    expect((await cli(['users', 'list'], alice)).code).toBe(0);
  });

  it('refuses bad input: a short password and an unknown role', async () => {
    const short = await cli(['users', 'create', 'bob'], admin, { input: 'short\n' });
    expect(short.code).toBe(1);
    expect(short.stderr).toMatch(/^error: password must be at least 8 characters/m);
    const role = await cli(['users', 'create', 'bob', '--role', 'root'], admin, { input: 'long-enough\n' });
    expect(role.code).toBe(2);
    expect(role.stderr).toMatch(/Allowed choices are admin, user/);
    const duplicate = await cli(['users', 'create', 'alice'], admin, { input: 'alice-password\n' });
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toMatch(/^error: Already exists: user "alice"/m);
  });

  it('disable ends the login of the user, enable lets it log in again, reset-password replaces the password', async () => {
    expect((await cli(['users', 'create', 'carol'], admin, { input: 'carol-password\n' })).code).toBe(0);
    const carol = newHome();
    expect((await cli(['login', '-u', 'carol'], carol, { input: 'carol-password\n' })).code).toBe(0);
    expect((await cli(['apikey', 'show'], carol)).code).toBe(1);

    expect((await cli(['users', 'disable', 'carol'], admin)).json()).toMatchObject({ disabled: true });
    const revoked = await cli(['apikey', 'regenerate'], carol);
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toMatch(/invalid token/);
    const login = await cli(['login', '-u', 'carol'], carol, { input: 'carol-password\n' });
    expect(login.code).toBe(1);
    expect(login.stderr).toMatch(/disabled/);

    expect((await cli(['users', 'enable', 'carol'], admin)).json()).toMatchObject({ disabled: false });
    const reset = await cli(['users', 'reset-password', 'carol'], admin, { input: 'carol-new-password\n' });
    expect(reset.code, reset.stderr).toBe(0);
    expect((await cli(['login', '-u', 'carol'], carol, { input: 'carol-password\n' })).code).toBe(1);
    expect((await cli(['login', '-u', 'carol'], carol, { input: 'carol-new-password\n' })).code).toBe(0);
  });

  it('delete removes an API-created user; the last admin and a file user stay', async () => {
    expect((await cli(['users', 'delete', 'carol'], admin)).json()).toEqual({ success: true });
    expect((await cli(['login', '-u', 'carol'], newHome(), { input: 'carol-new-password\n' })).code).toBe(1);
    const file = await cli(['users', 'delete', 'admin'], admin);
    expect(file.code).toBe(1);
    expect(file.stderr).toMatch(/remove "admin" from security.users in the configuration file/);
    expect((await cli(['users', 'disable', 'alice'], admin)).code).toBe(0);
    const last = await cli(['users', 'disable', 'admin'], admin);
    expect(last.code).toBe(1);
    expect(last.stderr).toMatch(/^error: At least one enabled admin must remain/);
  });
});
