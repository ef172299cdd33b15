import type { Command } from 'commander';
import { AgentryClient, ApiError } from '@agentry/client';
import type { Context } from '../context.js';
import { describeSource, isExpired, maskSecret, type Credential, type LoginCredential } from '../credentials.js';
import { CliError, UsageError } from '../errors.js';
import { shortTime } from '../output.js';
import { examples, type Cli } from '../command-kit.js';

/** A credential as whoami shows it: never the secret, only enough of it to recognise it. */
function credentialView(ctx: Context, c: Credential): Record<string, unknown> {
  const described = describeSource(c, ctx.setup.home);
  if (c.kind === 'jwt') {
    return { kind: 'jwt', source: 'login', username: c.username, expireAt: c.expireAt, expired: isExpired(c, ctx.credentials.now), file: c.file, described };
  }
  if (c.source === 'env') return { kind: 'apiKey', source: 'env', variable: c.variable, key: maskSecret(c.token), described };
  return { kind: 'apiKey', source: 'config', file: c.file, via: c.via, accountId: c.accountId, key: maskSecret(c.token), described };
}

async function probe(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (err) {
    return err instanceof ApiError ? `refused: ${err.message}` : (err as Error).message;
  }
}

export async function askPassword(ctx: Context, question: string): Promise<string> {
  const answer = await ctx.prompter.secret(question);
  if (!answer) throw new UsageError('no password given');
  return answer;
}

/** A new password: twice on a terminal (a typo unseen would lock someone out), once from stdin. */
export async function askNewPassword(ctx: Context, question: string): Promise<string> {
  const password = await askPassword(ctx, question);
  if (ctx.prompter.terminal && (await askPassword(ctx, 'again: ')) !== password) throw new CliError('the passwords differ; nothing changed');
  return password;
}

export function accountCommands(program: Command, cli: Cli): void {
  loginCommands(program, cli);
  whoamiCommand(program, cli);
  apiKeyCommands(program, cli);
  passwdCommand(program, cli);
}

function loginCommands(program: Command, cli: Cli): void {
  const login = program
    .command('login')
    .summary('log in and keep the token for this server')
    .description(
      'Log in with a username and password; the JWT is kept in ~/.config/agentry/credentials.json\n' +
        '(mode 0600) for this server, and renewed by asking for the password when it expires.\n' +
        'When stdin is not a terminal, the username (without -u) and the password are read from it, a line each.',
    )
    .option('-u, --username <name>', 'the user (default: asked, or the user of the last login here)')
    .action(cli.action(logIn));
  examples(login, 'agentry login', 'agentry login -u admin', 'printf "%s\\n" "$ADMIN_PASSWORD" | agentry login -u admin');

  const logout = program
    .command('logout')
    .summary('forget the login for this server')
    .description('Remove the cached login for this server (--all: for every server). The token itself stays valid until it expires.')
    .option('--all', 'forget every cached login')
    .action(cli.action(logOut));
  examples(logout, 'agentry logout', 'agentry logout --all');
}

function whoamiCommand(program: Command, cli: Cli): void {
  const whoami = program
    .command('whoami')
    .summary('show the credential in use, every source looked at and which won')
    .description(
      'Show the credential in use, every source looked at and which one won. Sources, first found wins:\n' +
        '  1. env AGENTRY_API_KEY (or SERVICE_API_KEY)\n' +
        '  2. the config file (-c/--config, AGENTRY_CONFIG, ./config.yaml): the api_key of the first\n' +
        '     enabled account under channels.api.accounts, else the key of the first security.users\n' +
        '     entry written "<password>:<API_KEY>"\n' +
        '  3. the login cached by "agentry login"\n' +
        'A cached login also signs management and account commands (they need a JWT).',
    )
    .option('--check', 'also ask the server whether it accepts the credentials')
    .action(cli.action(showWhoami));
  examples(whoami, 'agentry whoami', 'agentry whoami --check', 'AGENTRY_API_KEY=sk-... agentry whoami --json');
}

function apiKeyCommands(program: Command, cli: Cli): void {
  const apikey = program.command('apikey').summary('show (masked) or regenerate your user API key').description('Your user API key (sk-...), for chat completions. Needs a login (a JWT).');
  examples(apikey, 'agentry apikey show', 'agentry apikey regenerate');

  const show = apikey
    .command('show')
    .alias('get')
    .description('Print your API key masked (sk-...0001); --reveal prints it whole (bare; {apiKey} with --json).')
    .option('--reveal', 'print the whole key')
    .action(cli.action(showApiKey));
  examples(show, 'agentry apikey show', 'export AGENTRY_API_KEY=$(agentry apikey show --reveal)');

  const regenerate = apikey
    .command('regenerate')
    .description('Make a new API key and print it (bare; {apiKey} with --json); the old one stops working at once.')
    .action(cli.action(regenerateApiKey));
  examples(regenerate, 'agentry apikey regenerate');
}

function passwdCommand(program: Command, cli: Cli): void {
  const passwd = program
    .command('passwd')
    .summary('change your password')
    .description(
      'Change a password (asked without echo; new one twice on a terminal; from stdin, a line each).\n' +
        'Tokens issued before the change stop working; the cached login is renewed.',
    )
    .option('-u, --username <name>', 'whose password (default: the logged-in user)')
    .action(cli.action(changePassword));
  examples(passwd, 'agentry passwd', 'agentry passwd -u alice');
}

async function logIn(ctx: Context, opts: { username?: string }): Promise<void> {
  const previous = ctx.credentials.login()?.username;
  let username = opts.username;
  if (username === undefined) {
    const answer = (await ctx.prompter.ask(previous ? `username (${previous}): ` : 'username: '))?.trim();
    username = answer || previous;
  }
  if (!username) throw new UsageError('a username is needed (-u <name>)');
  const result = await logInAsking(ctx, username);
  ctx.credentials.save(username, result);
  ctx.printer.done(`logged in to ${ctx.url} as ${username} until ${shortTime(result.expireAt)} UTC`, {
    url: ctx.url,
    username,
    expireAt: result.expireAt,
    file: ctx.credentials.store.file,
  });
  const key = ctx.credentials.apiKey();
  if (key) ctx.printer.note(`note: chat requests keep using the API key from ${describeSource(key, ctx.setup.home)}, which comes first; the login signs management and account commands`);
}

/** Tries on a terminal a person gets before the command gives up (a typo should not end it). */
const LOGIN_TRIES = 3;

/**
 * Asks the password and logs in. On a terminal a wrong password asks again (up to LOGIN_TRIES
 * in all, as `sudo` does); from stdin, or any other refusal (too many attempts, a disabled
 * user), the error ends the command.
 */
async function logInAsking(ctx: Context, username: string) {
  for (let attempt = 1; ; attempt++) {
    const password = await askPassword(ctx, `password for ${username}: `);
    try {
      return await ctx.spin('logging in', () => ctx.anonymous.auth.login(username, password));
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401) || !ctx.prompter.terminal || attempt >= LOGIN_TRIES) throw err;
      ctx.printer.note(`${err.message}; try again (${attempt + 1} of ${LOGIN_TRIES})`);
    }
  }
}

async function logOut(ctx: Context, opts: { all?: boolean }): Promise<void> {
  const removed = opts.all ? ctx.credentials.store.clear() : ctx.credentials.store.delete(ctx.url);
  const what = opts.all ? 'every server' : ctx.url;
  ctx.printer.done(removed ? `logged out of ${what}` : `no login was kept for ${what}`, { success: true, removed, url: opts.all ? null : ctx.url });
}

async function showWhoami(ctx: Context, opts: { check?: boolean }): Promise<void> {
  const inUse = ctx.credentials.inUse();
  const login = ctx.credentials.login();
  const info: Record<string, unknown> = {
    url: ctx.url,
    credential: inUse ? credentialView(ctx, inUse) : null,
    login: login ? credentialView(ctx, login) : null,
    sources: ctx.credentials.survey(),
  };
  if (opts.check) info.check = await checkCredentials(ctx, inUse, login);
  if (ctx.json) return ctx.printer.json(info);
  ctx.printer.text(`${whoamiLines(ctx, inUse, login, info.check as Record<string, string> | undefined).join('\n')}\n`);
}

/** Asks the server whether it takes the chat credential and the login. */
async function checkCredentials(ctx: Context, inUse: Credential | undefined, login: LoginCredential | undefined): Promise<Record<string, string>> {
  const check: Record<string, string> = {};
  check.chat = await ctx.spin('checking', () => probe(() => new AgentryClient({ url: ctx.url, token: inUse?.token }).models()));
  if (login) check.login = await ctx.spin('checking', () => probe(() => new AgentryClient({ url: ctx.url, token: login.token }).auth.apiKey()));
  return check;
}

/** whoami on a terminal: the server, the credential, the login and the check, a line each. */
function whoamiLines(ctx: Context, inUse: Credential | undefined, login: LoginCredential | undefined, check: Record<string, string> | undefined): string[] {
  const lines = [`server      ${ctx.url}`];
  if (!inUse) lines.push('credential  none (set AGENTRY_API_KEY, add an api account to the config file, or run "agentry login")');
  else if (inUse.kind === 'apiKey') lines.push(`credential  API key ${maskSecret(inUse.token)} from ${describeSource(inUse, ctx.setup.home)}`);
  else lines.push(`credential  JWT of ${inUse.username} from ${describeSource(inUse, ctx.setup.home)}`);
  if (login) {
    const state = isExpired(login, ctx.credentials.now) ? 'expired' : 'expires';
    lines.push(`login       ${login.username}, ${state} ${shortTime(login.expireAt)} UTC${inUse !== undefined && inUse.kind === 'apiKey' ? ' (signs management and account commands)' : ''}`);
  } else lines.push('login       none');
  lines.push('sources     (first found wins)');
  for (const r of ctx.credentials.survey()) {
    const state = r.problem ? `unreadable: ${r.problem}` : r.found === null ? 'nothing' : `${r.found}${r.used ? '  <- in use' : '  (not used)'}`;
    lines.push(`  ${r.source}: ${state}`);
  }
  if (check) {
    lines.push(`check       chat: ${check.chat}`);
    if (check.login) lines.push(`            login: ${check.login}`);
  }
  return lines;
}

async function showApiKey(ctx: Context, opts: { reveal?: boolean }): Promise<void> {
  const answer = await ctx.spin('loading', () => ctx.client.auth.apiKey());
  // A screen is read over shoulders and kept in scrollback: the whole key only when asked for.
  const shown = answer.apiKey && !opts.reveal ? { apiKey: maskSecret(answer.apiKey) } : answer;
  // The key is content: printed bare (for $(agentry apikey show --reveal)) unless --json asks.
  if (ctx.options.json) return ctx.printer.json(shown);
  if (!shown.apiKey) throw new CliError('you have no API key yet: "agentry apikey regenerate" makes one');
  ctx.printer.text(`${shown.apiKey}\n`);
  if (!opts.reveal) ctx.printer.note('(masked: --reveal prints the whole key)');
}

async function regenerateApiKey(ctx: Context): Promise<void> {
  const answer = await ctx.spin('regenerating', () => ctx.client.auth.regenerateApiKey());
  if (ctx.options.json) return ctx.printer.json(answer);
  ctx.printer.text(`${answer.apiKey}\n`);
  ctx.printer.note('the previous key no longer works');
}

async function changePassword(ctx: Context, opts: { username?: string }): Promise<void> {
  const cached = ctx.credentials.login();
  const username = opts.username ?? cached?.username;
  if (!username) throw new UsageError('log in first ("agentry login") or name the user with -u');
  const oldPassword = await askPassword(ctx, `current password for ${username}: `);
  const newPassword = await askNewPassword(ctx, 'new password: ');
  const change = (token: string) => ctx.spin('changing the password', () => new AgentryClient({ url: ctx.url, token }).auth.changePassword(oldPassword, newPassword));
  const fresh = async () => (await ctx.spin('logging in', () => ctx.anonymous.auth.login(username, oldPassword))).token;
  let result;
  if (cached?.username === username && !isExpired(cached, ctx.credentials.now)) {
    try {
      result = await change(cached.token);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401) throw err;
      result = await change(await fresh());
    }
  } else result = await change(await fresh());
  // Older tokens died with the change: keep the fresh one (unless another user is logged in here).
  if (!cached || cached.username === username) ctx.credentials.save(username, result);
  ctx.printer.done(`changed the password of ${username}; tokens issued before now no longer work`, { success: result.success, message: result.message, username, expireAt: result.expireAt });
}
