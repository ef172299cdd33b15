import type { Command } from 'commander';
import type { ChannelAccount, ChannelPlatformView } from '@agentry/client';
import type { Context } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';

/** `channels show|create|update|delete`: one platform account (`list` is in channels.ts). */

interface WriteOpts {
  name?: string;
  set?: string[];
  secret?: string[];
  enable?: boolean;
  disable?: boolean;
  bind?: string;
}

const path = (platform: string, id?: string) =>
  `/channels/${encodeURIComponent(platform)}/accounts${id === undefined ? '' : `/${encodeURIComponent(id)}`}`;

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--set key=value` settings: the value is JSON when it parses (true, 5), else text. */
function settings(pairs: string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--set takes key=value (got "${pair}")`);
    const raw = pair.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // Not JSON: the text as it is.
    }
    out[pair.slice(0, eq)] = value;
  }
  return out;
}

/** The written fields of an account from the options; secrets are asked, never arguments (shell history). */
async function body(ctx: Context, opts: WriteOpts): Promise<Record<string, unknown>> {
  if (opts.enable && opts.disable) throw new UsageError('give --enable or --disable, not both');
  const secrets: Record<string, string> = {};
  for (const field of opts.secret ?? []) {
    const value = (await ctx.prompter.secret(`${field}: `))?.trim();
    if (!value) throw new UsageError(`no value given for ${field}`);
    secrets[field] = value;
  }
  return {
    ...settings(opts.set),
    ...secrets,
    ...(opts.name !== undefined ? { name: opts.name } : {}),
    ...(opts.enable || opts.disable ? { enabled: opts.enable === true } : {}),
  };
}

function writeOptions(cmd: Command): Command {
  return cmd
    .option('--name <name>', 'display name')
    .option('--set <key=value>', 'a platform setting (repeatable): dm_policy=allow, app_id=..., base_url=...', collect)
    .option('--secret <field>', 'a secret field (repeatable: token, app_secret, api_key, ...), asked without echo (from stdin, a line each)', collect)
    .option('--enable', 'enable the account')
    .option('--disable', 'disable the account');
}

export function channelAccountCommands(channels: Command, cli: Cli): void {
  const show = channels
    .command('show')
    .alias('get')
    .description('Show a platform (its accounts), or one account (secrets only as whether one is set).')
    .argument('<platform>', 'api, chat_a (Lark), chat_a_webhook (Lark webhook), chat_b (DingTalk), chat_c (WeCom), chat_d (Telegram) or chat_e (Slack)')
    .argument('[account]', 'account id')
    .action(cli.action(showAccount));
  examples(show, 'agentry channels show chat_d', 'agentry channels show chat_d bot');

  const create = writeOptions(
    channels
      .command('create')
      .description('Create an account of a platform (an api account without --secret api_key gets a generated key, shown once).')
      .argument('<platform>', 'the platform')
      .argument('<id>', 'account id'),
  )
    .option('--bind <agent>', 'also bind the account to this agent')
    .action(cli.action(createAccount));
  examples(create, 'agentry channels create chat_d bot --name "Ops bot" --secret token --bind support', 'agentry channels create api partner --name "Partner"');

  const update = writeOptions(channels.command('update').description('Change an account: only the fields given change.').argument('<platform>', 'the platform').argument('<id>', 'account id')).action(
    cli.action(updateAccount),
  );
  examples(update, 'agentry channels update chat_d bot --set dm_policy=allow', 'agentry channels update chat_d bot --disable', 'agentry channels update chat_d bot --secret token');

  const del = channels.command('delete').alias('rm').description('Delete an account (its bindings go with it).').argument('<platform>', 'the platform').argument('<id>', 'account id').action(cli.action(deleteAccount));
  examples(del, 'agentry channels delete chat_d old-bot');
}

async function showAccount(ctx: Context, _opts: unknown, platform: string, account: string | undefined): Promise<void> {
  if (account !== undefined) return ctx.printer.object(await ctx.spin('loading the account', () => ctx.client.raw<ChannelAccount>('GET', path(platform, account))));
  const view: ChannelPlatformView = await ctx.spin('loading the platform', () => ctx.client.channels.get(platform));
  if (ctx.json) return ctx.printer.json(view);
  ctx.printer.text(`${platform}: ${view.enabled ? 'enabled' : 'disabled'}\n`);
  ctx.printer.list<ChannelAccount>(
    Object.values(view.accounts),
    [
      { header: 'account', value: (a) => a.id },
      { header: 'name', value: (a) => a.name },
      { header: 'enabled', value: (a) => (a.enabled ? 'yes' : 'no') },
      { header: 'secret', value: (a) => (a.hasSecret ? 'set' : '') },
    ],
    'no accounts',
  );
}

async function createAccount(ctx: Context, opts: WriteOpts, platform: string, id: string): Promise<void> {
  const fields = await body(ctx, opts);
  const created = await ctx.spin('creating the account', () =>
    ctx.client.raw<ChannelAccount & { apiKey?: string }>('POST', path(platform), { json: { id, ...fields, ...(opts.bind ? { binding: { agentId: opts.bind } } : {}) } }),
  );
  if (ctx.json) return ctx.printer.json(created);
  ctx.printer.text(`created ${platform} account ${created.id}${opts.bind ? `, bound to ${opts.bind}` : ''}\n`);
  // A generated key is shown by the server this once: it is the user's only chance to keep it.
  if (created.apiKey) ctx.printer.text(`API key (shown once): ${created.apiKey}\n`);
}

async function updateAccount(ctx: Context, opts: WriteOpts, platform: string, id: string): Promise<void> {
  const fields = await body(ctx, opts);
  if (Object.keys(fields).length === 0) throw new UsageError('give what changes: --name, --set, --secret, --enable or --disable');
  const updated = await ctx.spin('updating the account', () => ctx.client.raw<ChannelAccount>('PUT', path(platform, id), { json: fields }));
  ctx.printer.done(`updated ${platform} account ${updated.id}`, updated);
}

async function deleteAccount(ctx: Context, _opts: unknown, platform: string, id: string): Promise<void> {
  const answer = await ctx.spin('deleting the account', () => ctx.client.raw<{ success: boolean }>('DELETE', path(platform, id)));
  if (!answer.success) throw new CliError(`${platform} account ${id} was not deleted`);
  ctx.printer.done(`deleted ${platform} account ${id}`, answer);
}
