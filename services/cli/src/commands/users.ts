import { Argument, Option, type Command } from 'commander';
import type { User, UserRole } from '@agentry/client';
import { CliError, UsageError } from '../errors.js';
import { shortTime } from '../output.js';
import { examples, type Cli } from '../command-kit.js';
import { enableDisableCommands } from '../enable-disable.js';
import { askNewPassword } from './account.js';

const ROLES: readonly UserRole[] = ['admin', 'user'];

function listCommand(users: Command, cli: Cli): void {
  const list = users
    .command('list')
    .alias('ls')
    .description('List users: role, state, whether they have an API key, where they come from.')
    .action(
      cli.action(async (ctx) => {
        const all = await ctx.spin('loading users', () => ctx.client.users.list());
        ctx.printer.list<User>(
          all,
          [
            { header: 'username', value: (u) => u.username },
            { header: 'role', value: (u) => u.role },
            { header: 'state', value: (u) => (u.disabled ? 'disabled' : 'enabled') },
            { header: 'api key', value: (u) => (u.hasApiKey ? 'yes' : 'no') },
            { header: 'source', value: (u) => u.source },
            { header: 'created', value: (u) => shortTime(u.createdAt) },
          ],
          'no users',
        );
      }),
    );
  examples(list, 'agentry users list', 'agentry users list --json');
}

function createCommand(users: Command, cli: Cli): void {
  const create = users
    .command('create')
    .description('Create a user; the password is asked (without echo; from stdin, one line), never taken from the command line.')
    .argument('<username>', 'letters, digits, ".", "_" and "-"')
    .addOption(new Option('-r, --role <role>', 'admin or user').choices(ROLES).default('user'))
    .action(
      cli.action(async (ctx, opts: { role: UserRole }, username: string) => {
        const password = await askNewPassword(ctx, `password for ${username}: `);
        const user = await ctx.spin('creating the user', () => ctx.client.users.create({ username, password, role: opts.role }));
        ctx.printer.done(`created ${user.role} ${user.username}`, user);
      }),
    );
  examples(create, 'agentry users create alice', 'agentry users create bob --role admin', 'printf "%s\\n" "$PASSWORD" | agentry users create carol');
}

function showUpdateCommands(users: Command, cli: Cli): void {
  const show = users
    .command('show')
    .alias('get')
    .description('Show one user.')
    .argument('<username>', 'the user')
    .action(
      cli.action(async (ctx, _opts, username: string) => {
        const user = (await ctx.spin('loading users', () => ctx.client.users.list())).find((u) => u.username === username);
        if (!user) throw new CliError(`Not found: user "${username}"`);
        ctx.printer.object(user);
      }),
    );
  examples(show, 'agentry users show alice');

  const update = users
    .command('update')
    .description('Change a user: its role, or whether it is enabled (the password: reset-password).')
    .argument('<username>', 'the user')
    .addOption(new Option('-r, --role <role>', 'admin or user').choices(ROLES))
    .option('--enable', 'enable the user')
    .option('--disable', 'disable the user')
    .action(
      cli.action(async (ctx, opts: { role?: UserRole; enable?: boolean; disable?: boolean }, username: string) => {
        if (opts.enable && opts.disable) throw new UsageError('give --enable or --disable, not both');
        const change = { ...(opts.role ? { role: opts.role } : {}), ...(opts.enable || opts.disable ? { disabled: opts.disable === true } : {}) };
        if (Object.keys(change).length === 0) throw new UsageError('give what changes: --role, --enable or --disable');
        const user = await ctx.spin('updating the user', () => ctx.client.users.update(username, change));
        ctx.printer.done(`updated ${user.username} (${user.role}, ${user.disabled ? 'disabled' : 'enabled'})`, user);
      }),
    );
  examples(update, 'agentry users update alice --role admin', 'agentry users update bob --disable');
}

function changeCommands(users: Command, cli: Cli): void {
  const setRole = users
    .command('set-role')
    .description("Change a user's role; it applies from the user's next request.")
    .argument('<username>', 'the user')
    .addArgument(new Argument('<role>', 'admin or user').choices(ROLES))
    .action(
      cli.action(async (ctx, _opts, username: string, role: UserRole) => {
        const user = await ctx.spin('changing the role', () => ctx.client.users.update(username, { role }));
        ctx.printer.done(`${user.username} is now ${user.role}`, user);
      }),
    );
  examples(setRole, 'agentry users set-role alice admin');

  enableDisableCommands(users, cli, {
    description: (disabled) =>
      disabled
        ? 'Disable a user: it cannot log in, and its tokens and API key stop working at once (for good: enabling revives neither).'
        : 'Enable a disabled user: it logs in again and makes a new API key.',
    argument: ['<username>', 'the user'],
    toggle: (ctx, username, disabled) => ctx.client.users.update(username, { disabled }),
    name: (user) => user.username,
    example: (command) => `agentry users ${command} alice`,
  });

  const reset = users
    .command('reset-password')
    .description("Set a user's password (asked without echo; from stdin, one line); the user's tokens stop working.")
    .argument('<username>', 'the user')
    .action(
      cli.action(async (ctx, _opts, username: string) => {
        const password = await askNewPassword(ctx, `new password for ${username}: `);
        const user = await ctx.spin('setting the password', () => ctx.client.users.update(username, { password }));
        ctx.printer.done(`set the password of ${user.username}; tokens issued before now no longer work`, user);
      }),
    );
  examples(reset, 'agentry users reset-password alice');
}

export function userCommands(program: Command, cli: Cli): void {
  const users = program
    .command('users')
    .summary('list, show, create, update, disable and delete users (admins)')
    .description(
      'User management; needs an admin login when the server requires authentication.\n' +
        'Users from security.users of the configuration file are deleted by removing them there.',
    );
  examples(users, 'agentry users list', 'agentry users create alice --role user', 'agentry users disable alice');
  listCommand(users, cli);
  showUpdateCommands(users, cli);
  createCommand(users, cli);
  changeCommands(users, cli);

  const del = users
    .command('delete')
    .alias('rm')
    .description('Delete a user created through the API; its tokens and API key stop working at once.')
    .argument('<username>', 'the user')
    .action(
      cli.action(async (ctx, _opts, username: string) => {
        const answer = await ctx.spin('deleting the user', () => ctx.client.users.delete(username));
        ctx.printer.done(`deleted ${username}`, answer);
      }),
    );
  examples(del, 'agentry users delete alice');
}
