import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentryClient } from '@agentry/client';
import { agentDsl, runCli, startGateway, tempHome, type CliOptions, type TestGateway } from './support.js';

/**
 * Where the credentials come from, in the spec's order (Authentication, rule 8): env
 * AGENTRY_API_KEY (alias SERVICE_API_KEY), then the first enabled `channels.api` account of the
 * config file, then the cached login; and the cached login's renewal when it has expired. The
 * gateway requires authentication, knows one api account key and a user with an API key; the
 * fake model echoes the last user message, so a chat that works answers with the message.
 */
const JWT_SECRET = 'cli-credentials-jwt-secret-0123456789';
const ADMIN_PASSWORD = 'admin-password-for-cli-2';
const ALICE_PASSWORD = 'alice-password-for-cli-2';
const ALICE_KEY = 'sk-alice-user-key-for-cli-tests-0001';
const ACCOUNT_KEY = 'sk-api-account-key-for-cli-tests-001';
const BOGUS_KEY = 'sk-not-a-key-anybody-knows-00000000';

let gw: TestGateway;
const homes: string[] = [];

function newHome(): string {
  const h = tempHome();
  homes.push(h);
  return h;
}

/** A client config file (not the server's) with a disabled account before the enabled one. */
function writeClientConfig(dir: string, name: string, accountKey: string, platformEnabled = true): string {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    [
      'channels:',
      '  api:',
      `    enabled: ${platformEnabled}`,
      '    accounts:',
      '      retired: {name: Retired, enabled: false, api_key: "sk-retired-account-key-000000000"}',
      `      second: {name: Second, api_key: "${accountKey}"}`,
      '      third: {name: Third, api_key: "sk-third-account-key-0000000000000"}',
    ].join('\n'),
  );
  return file;
}

function credentialsFile(home: string): string {
  return path.join(home, '.config', 'agentry', 'credentials.json');
}

/** An HS256 JWT as the gateway signs them, already expired. */
function expiredToken(username: string): { token: string; expireAt: string } {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) - 3600;
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ tv: 0, iss: 'agentry', sub: username, iat: exp - 86_400, exp })}`;
  const sig = createHmac('sha256', JWT_SECRET).update(body).digest('base64url');
  return { token: `${body}.${sig}`, expireAt: new Date(exp * 1000).toISOString() };
}

interface WhoAmI {
  url: string;
  credential: null | { kind: string; source: string; variable?: string; accountId?: string; via?: string; key?: string; username?: string; expired?: boolean };
  login: null | { username: string; expired: boolean; expireAt: string };
  check?: { chat: string; login?: string };
}

beforeAll(async () => {
  gw = await startGateway({
    config: [
      'security:',
      '  requireAuth: true',
      `  jwtSecret: "${JWT_SECRET}"`,
      '  users:',
      `    admin: "${ADMIN_PASSWORD}"`,
      `    alice: "${ALICE_PASSWORD}:${ALICE_KEY}"`,
      'channels:',
      '  api:',
      '    accounts:',
      `      primary: {name: Primary, api_key: "${ACCOUNT_KEY}"}`,
    ],
  });
  // The typed client the CLI is built on, used directly: one agent to talk to.
  const { token } = await new AgentryClient({ url: gw.url }).auth.login('admin', ADMIN_PASSWORD);
  await new AgentryClient({ url: gw.url, token }).agents.create(agentDsl('echo'));
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  for (const h of homes) fs.rmSync(h, { recursive: true, force: true });
});

describe('credential sources in order of precedence', () => {
  let home: string;
  let configDir: string;
  const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);

  beforeAll(() => {
    home = newHome();
    configDir = newHome();
  });

  it('none: whoami says so, chat and management commands are refused with a hint', async () => {
    const who = await cli(['whoami']);
    expect(who.code, who.stderr).toBe(0);
    expect(who.json<WhoAmI>()).toMatchObject({ url: gw.url, credential: null, login: null });

    const chat = await cli(['chat', '-a', 'echo', 'hello']);
    expect(chat.code).toBe(1);
    expect(chat.stderr).toBe('error: Authentication required: send an API key as "Authorization: Bearer <key>": a user API key comes from POST /api/v1/auth/api-key (after POST /api/v1/auth/login), an api account key from channels.api.accounts.<id>.api_key (set AGENTRY_API_KEY or run "agentry login")\n');

    const agents = await cli(['agents', 'list']);
    expect(agents.code).toBe(1);
    expect(agents.stderr).toMatch(/^error: Authentication required: log in .* \(run "agentry login"\)\n$/);
  });

  it('3. the cached login (mode 0600): signs chat and management', async () => {
    const login = await cli(['login'], { input: `admin\n${ADMIN_PASSWORD}\n` });
    expect(login.code, login.stderr).toBe(0);
    expect(login.json()).toMatchObject({ url: gw.url, username: 'admin', expireAt: expect.any(String), file: credentialsFile(home) });
    expect(login.stdout).not.toMatch(/eyJ/); // the token itself is never printed
    expect(fs.statSync(credentialsFile(home)).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(credentialsFile(home))).mode & 0o777).toBe(0o700);
    const stored = JSON.parse(fs.readFileSync(credentialsFile(home), 'utf8')) as { servers: Record<string, { username: string; token: string }> };
    expect(stored.servers[gw.url]).toMatchObject({ username: 'admin', token: expect.stringMatching(/^eyJ/) });

    const who = await cli(['whoami', '--check']);
    expect(who.json<WhoAmI>()).toMatchObject({
      credential: { kind: 'jwt', source: 'login', username: 'admin', expired: false },
      login: { username: 'admin', expired: false },
      check: { chat: 'ok', login: 'ok' },
    });

    expect(await cli(['chat', '-a', 'echo', 'via the login'])).toMatchObject({ code: 0, stdout: 'via the login\n' });
    // Without -a: the only agent there is.
    expect(await cli(['chat', 'to the only agent'])).toMatchObject({ code: 0, stdout: 'to the only agent\n' });
    expect((await cli(['agents', 'list'])).json()).toEqual([{ ruleChain: { id: 'echo', name: 'echo', owner: 'admin', audience: { everyone: true, users: [], roles: [], apiAccounts: [] } } }]);

    const wrong = await cli(['login', '-u', 'admin'], { input: 'not-the-password\n' });
    expect(wrong).toMatchObject({ code: 1, stderr: expect.stringMatching(/error: Authentication required: wrong username or password\n$/) });
  });

  it('2. the first enabled api account of the config file comes before the login', async () => {
    const file = writeClientConfig(configDir, 'client.yaml', '${CLI_TEST_ACCOUNT_KEY}');
    const env = { AGENTRY_CONFIG: file, CLI_TEST_ACCOUNT_KEY: ACCOUNT_KEY };

    const who = await cli(['whoami'], { env });
    expect(who.json<WhoAmI>()).toMatchObject({
      credential: { kind: 'apiKey', source: 'config', accountId: 'second', via: 'AGENTRY_CONFIG', key: 'sk-...-001' },
      login: { username: 'admin' },
    });
    expect(await cli(['chat', '-a', 'echo', 'via the account'], { env })).toMatchObject({ code: 0, stdout: 'via the account\n' });

    // A key the server does not know is refused, although the login would work: it comes first.
    const bogus = await cli(['chat', '-a', 'echo', 'hi'], { env: { ...env, CLI_TEST_ACCOUNT_KEY: BOGUS_KEY } });
    expect(bogus.code).toBe(1);
    expect(bogus.stderr).toBe(`error: Authentication required: invalid API key: a user API key comes from POST /api/v1/auth/api-key (after POST /api/v1/auth/login), an api account key from channels.api.accounts.<id>.api_key (the credential was from account "second" of channels.api in ${file} (AGENTRY_CONFIG))\n`);
    // Management routes need a JWT: they keep using the login.
    expect((await cli(['agents', 'list'], { env: { ...env, CLI_TEST_ACCOUNT_KEY: BOGUS_KEY } })).code).toBe(0);

    // --config, and ./config.yaml in the working directory, are found the same way.
    expect((await cli(['whoami', '--config', file], { env: { CLI_TEST_ACCOUNT_KEY: ACCOUNT_KEY } })).json<WhoAmI>().credential).toMatchObject({ via: '--config' });
    writeClientConfig(configDir, 'config.yaml', '${CLI_TEST_ACCOUNT_KEY:-' + ACCOUNT_KEY + '}');
    const local = await cli(['chat', '-a', 'echo', 'via ./config.yaml'], { cwd: configDir });
    expect(local).toMatchObject({ code: 0, stdout: 'via ./config.yaml\n' });
    expect((await cli(['whoami'], { cwd: configDir })).json<WhoAmI>().credential).toMatchObject({ source: 'config', via: './config.yaml' });

    // ${NAME} substitution as the server does it: an unset variable without default names itself.
    const unset = await cli(['chat', '-a', 'echo', 'hi'], { env: { AGENTRY_CONFIG: file } });
    expect(unset).toMatchObject({ code: 1, stderr: 'error: channels.api.accounts.second.api_key: environment variable CLI_TEST_ACCOUNT_KEY is not set\n' });
    const missing = await cli(['whoami', '--config', 'nope.yaml']);
    expect(missing).toMatchObject({ code: 1, stderr: 'error: config file nope.yaml (--config) does not exist\n' });

    // A switched-off api platform offers no key: the login is next.
    const off = writeClientConfig(configDir, 'off.yaml', ACCOUNT_KEY, false);
    expect((await cli(['whoami'], { env: { AGENTRY_CONFIG: off } })).json<WhoAmI>().credential).toMatchObject({ kind: 'jwt', source: 'login' });
  });

  it('1. env AGENTRY_API_KEY (alias SERVICE_API_KEY) comes before the config file', async () => {
    const file = writeClientConfig(configDir, 'client2.yaml', ACCOUNT_KEY);

    const env = { AGENTRY_CONFIG: file, AGENTRY_API_KEY: ALICE_KEY };
    const who = await cli(['whoami'], { env });
    expect(who.json<WhoAmI>().credential).toEqual(expect.objectContaining({ kind: 'apiKey', source: 'env', variable: 'AGENTRY_API_KEY', key: 'sk-...0001' }));
    expect(await cli(['chat', '-a', 'echo', 'via the env'], { env })).toMatchObject({ code: 0, stdout: 'via the env\n' });

    const bogus = await cli(['chat', '-a', 'echo', 'hi'], { env: { ...env, AGENTRY_API_KEY: BOGUS_KEY } });
    expect(bogus).toMatchObject({ code: 1, stderr: 'error: Authentication required: invalid API key: a user API key comes from POST /api/v1/auth/api-key (after POST /api/v1/auth/login), an api account key from channels.api.accounts.<id>.api_key (the credential was from env AGENTRY_API_KEY)\n' });

    const alias = await cli(['whoami'], { env: { AGENTRY_CONFIG: file, SERVICE_API_KEY: ALICE_KEY } });
    expect(alias.json<WhoAmI>().credential).toMatchObject({ source: 'env', variable: 'SERVICE_API_KEY' });
    expect(await cli(['chat', '-a', 'echo', 'via the alias'], { env: { SERVICE_API_KEY: ALICE_KEY } })).toMatchObject({ stdout: 'via the alias\n' });
    const both = await cli(['whoami'], { env: { AGENTRY_API_KEY: ALICE_KEY, SERVICE_API_KEY: BOGUS_KEY } });
    expect(both.json<WhoAmI>().credential).toMatchObject({ variable: 'AGENTRY_API_KEY' });

    // A broken config file does not matter while the environment has a key (it is not read).
    fs.writeFileSync(path.join(configDir, 'broken.yaml'), 'channels: [oops');
    expect((await cli(['whoami'], { env: { AGENTRY_CONFIG: path.join(configDir, 'broken.yaml'), AGENTRY_API_KEY: ALICE_KEY } })).code).toBe(0);
    const broken = await cli(['whoami'], { env: { AGENTRY_CONFIG: path.join(configDir, 'broken.yaml') } });
    expect(broken).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: broken\.yaml: bad YAML at line 1/) });
  });
});

describe('an expired cached token', () => {
  let home: string;
  const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);
  const expire = () => {
    const file = credentialsFile(home);
    const data = JSON.parse(fs.readFileSync(file, 'utf8')) as { servers: Record<string, unknown> };
    data.servers[gw.url] = { username: 'admin', ...expiredToken('admin') };
    fs.writeFileSync(file, JSON.stringify(data));
  };

  beforeAll(async () => {
    home = newHome();
    expect((await cli(['login', '-u', 'admin'], { input: `${ADMIN_PASSWORD}\n` })).code).toBe(0);
  });

  it('is renewed by asking for the password again, then the command goes on', async () => {
    expire();
    expect((await cli(['whoami'])).json<WhoAmI>().login).toMatchObject({ username: 'admin', expired: true });

    const list = await cli(['agents', 'list'], { input: `${ADMIN_PASSWORD}\n` });
    expect(list.code, list.stderr).toBe(0);
    expect(list.json()).toEqual([{ ruleChain: { id: 'echo', name: 'echo', owner: 'admin', audience: { everyone: true, users: [], roles: [], apiAccounts: [] } } }]);
    expect(list.stderr).toBe(`the saved login of admin for ${gw.url} has expired; log in again\npassword for admin: \n`);

    const stored = JSON.parse(fs.readFileSync(credentialsFile(home), 'utf8')) as { servers: Record<string, { token: string; expireAt: string }> };
    const renewed = stored.servers[gw.url]!;
    expect(renewed.token).not.toBe(expiredToken('admin').token);
    expect(Date.parse(renewed.expireAt)).toBeGreaterThan(Date.now());
    expect(fs.statSync(credentialsFile(home)).mode & 0o777).toBe(0o600);
    expect((await cli(['agents', 'list'])).code).toBe(0); // no question this time
  });

  it('is renewed for chat too; without a password the refusal stands', async () => {
    expire();
    const chat = await cli(['chat', '-a', 'echo', 'renewed'], { input: `${ADMIN_PASSWORD}\n` });
    expect(chat).toMatchObject({ code: 0, stdout: 'renewed\n' });
    expect(chat.stderr).toMatch(/has expired; log in again/);

    expire();
    const refused = await cli(['apikey', 'show']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^the saved login of admin .* has expired; log in again\npassword for admin: \nerror: Authentication required: token expired\n$/);
  });
});

describe('account commands', () => {
  it('apikey show|regenerate: the new key works for chat, the old one stops working', async () => {
    const home = newHome();
    const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);
    expect((await cli(['login', '-u', 'admin'], { input: `${ADMIN_PASSWORD}\n` })).code).toBe(0);

    const none = await cli(['apikey', 'show']);
    expect(none).toMatchObject({ code: 1, stderr: 'error: you have no API key yet: "agentry apikey regenerate" makes one\n' });
    expect((await cli(['apikey', 'show', '--json'])).json()).toEqual({ apiKey: null });

    const first = (await cli(['apikey', 'regenerate'])).stdout.trim();
    expect(first).toMatch(/^sk-[A-Za-z0-9_-]{20,}$/);
    // Masked unless --reveal (issue 23, item 5): the kind and the last four only.
    const masked = `sk-...${first.slice(-4)}`;
    expect(await cli(['apikey', 'show'])).toMatchObject({ code: 0, stdout: `${masked}\n` });
    expect((await cli(['apikey', 'show', '--json'])).json()).toEqual({ apiKey: masked });
    expect((await cli(['apikey', 'show', '--reveal'])).stdout).toBe(`${first}\n`);
    expect((await cli(['apikey', 'get', '--reveal', '--json'])).json()).toEqual({ apiKey: first });
    expect(await cli(['chat', '-a', 'echo', 'with my key'], { env: { AGENTRY_API_KEY: first } })).toMatchObject({ code: 0, stdout: 'with my key\n' });

    const second = (await cli(['apikey', 'regenerate', '--json'])).json<{ apiKey: string }>().apiKey;
    expect(second).not.toBe(first);
    expect((await cli(['chat', '-a', 'echo', 'hi'], { env: { AGENTRY_API_KEY: first } })).code).toBe(1);
  });

  it('passwd renews the cached login; logout forgets it', async () => {
    const home = newHome();
    const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);
    expect((await cli(['login', '-u', 'alice'], { input: `${ALICE_PASSWORD}\n` })).code).toBe(0);

    const wrongOld = await cli(['passwd'], { input: 'not-my-password\nwhatever-new-1\n' });
    expect(wrongOld).toMatchObject({ code: 1, stderr: expect.stringMatching(/error: Not allowed: the old password is wrong\n$/) });

    const NEW = 'alice-new-password-2';
    const passwd = await cli(['passwd'], { input: `${ALICE_PASSWORD}\n${NEW}\n` });
    expect(passwd.code, passwd.stderr).toBe(0);
    expect(passwd.json()).toMatchObject({ success: true, username: 'alice' });
    // The old token died with the change; the cached one is the fresh token.
    expect((await cli(['whoami', '--check'])).json<WhoAmI>().check).toEqual({ chat: 'ok', login: 'ok' });

    expect((await cli(['login', '-u', 'alice'], { input: `${ALICE_PASSWORD}\n` })).code).toBe(1);
    expect((await cli(['login', '-u', 'alice'], { input: `${NEW}\n` })).code).toBe(0);

    const out = await cli(['logout']);
    expect(out.json()).toEqual({ success: true, removed: true, url: gw.url });
    expect((await cli(['whoami'])).json<WhoAmI>()).toMatchObject({ credential: null, login: null });
    const again = await cli(['logout']);
    expect(again.json()).toMatchObject({ removed: false });
    const needsLogin = await cli(['apikey', 'show']);
    expect(needsLogin).toMatchObject({ code: 1, stderr: 'error: Authentication required: this route needs a JWT from POST /api/v1/auth/login (run "agentry login")\n' });

    // passwd without a cached login: -u and the old password log in first.
    const other = await cli(['passwd', '-u', 'alice'], { input: `${NEW}\n${ALICE_PASSWORD}\n` });
    expect(other.code, other.stderr).toBe(0);
    expect((await cli(['whoami'])).json<WhoAmI>().login).toMatchObject({ username: 'alice' });
  });
});
