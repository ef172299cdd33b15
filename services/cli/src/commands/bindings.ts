import type { Command } from 'commander';
import type { Context } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import { yaml } from '../lazy.js';

/** A binding as `GET /bindings` shows it: which agent answers which platform (and account). */
export interface Binding {
  agentId: string;
  match: { default?: boolean; channel?: string; accountId?: string };
}

interface MatchOpts {
  agent?: string;
  channel?: string;
  account?: string;
  default?: boolean;
}

const load = async (ctx: Context) => (await ctx.client.raw<{ bindings: Binding[] }>('GET', '/bindings')).bindings;
const save = (ctx: Context, bindings: Binding[]) => ctx.client.raw<{ bindings: Binding[] }>('PUT', '/bindings', { json: { bindings } });

/** The match the options describe, as PUT /bindings takes it. */
function matchOf(opts: MatchOpts): Binding['match'] {
  if (opts.account && !opts.channel) throw new UsageError('--account needs --channel (the platform of the account)');
  return { ...(opts.default ? { default: true } : {}), ...(opts.channel ? { channel: opts.channel } : {}), ...(opts.account ? { accountId: opts.account } : {}) };
}

const same = (a: Binding, b: Binding) =>
  a.agentId === b.agentId && Boolean(a.match.default) === Boolean(b.match.default) && a.match.channel === b.match.channel && a.match.accountId === b.match.accountId;

function matchOptions(cmd: Command): Command {
  return cmd
    .requiredOption('-a, --agent <id>', 'the agent')
    .option('--channel <platform>', 'the platform (chat_a ... chat_e, api)')
    .option('--account <id>', 'one account of that platform (default: all of its accounts)')
    .option('--default', 'the agent that answers what no other binding matches');
}

export function bindingCommands(program: Command, cli: Cli): void {
  const bindings = program
    .command('bindings')
    .summary('list, create, update and delete bindings of channel accounts to agents')
    .description('Bindings say which agent answers a platform (or one account of it); agents send only where one allows it.');
  examples(bindings, 'agentry bindings list', 'agentry bindings create -a support --channel chat_d --account bot');

  const list = bindings.command('list').alias('ls').description('List the bindings, in the order they are matched.').action(cli.action(listBindings));
  examples(list, 'agentry bindings list', 'agentry bindings list --json > bindings.json');

  const create = matchOptions(bindings.command('create').alias('add').description('Add a binding (at the end of the list).')).action(cli.action(addBinding));
  examples(create, 'agentry bindings create -a support --channel chat_d --account bot', 'agentry bindings create -a triage --default');

  const update = bindings
    .command('update')
    .description('Replace every binding with a file\'s ({bindings: [...]} or a list; JSON or YAML, "-" reads stdin).')
    .requiredOption('-f, --file <file>', 'the bindings')
    .action(cli.action(replaceBindings));
  examples(update, 'agentry bindings update -f bindings.yaml', 'agentry bindings list --json > b.json   # edit it, then: agentry bindings update -f b.json');

  const del = matchOptions(bindings.command('delete').alias('rm').description('Delete the binding that matches exactly these options.')).action(cli.action(deleteBinding));
  examples(del, 'agentry bindings delete -a support --channel chat_d --account bot');
}

async function listBindings(ctx: Context): Promise<void> {
  const items = await ctx.spin('loading bindings', () => load(ctx));
  ctx.printer.list<Binding>(
    items,
    [
      { header: 'agent', value: (b) => b.agentId },
      { header: 'channel', value: (b) => b.match.channel ?? (b.match.default ? '(default)' : '*') },
      { header: 'account', value: (b) => b.match.accountId ?? (b.match.channel ? '*' : '') },
    ],
    'no bindings',
  );
}

async function addBinding(ctx: Context, opts: MatchOpts): Promise<void> {
  const binding: Binding = { agentId: opts.agent!, match: matchOf(opts) };
  if (!binding.match.default && !binding.match.channel) throw new UsageError('give --channel (and maybe --account) or --default');
  const current = await ctx.spin('loading bindings', () => load(ctx));
  if (current.some((b) => same(b, binding))) throw new CliError('that binding exists already');
  const saved = await ctx.spin('saving bindings', () => save(ctx, [...current, binding]));
  ctx.printer.done(`bound ${binding.agentId} to ${describe(binding)}`, saved);
}

async function deleteBinding(ctx: Context, opts: MatchOpts): Promise<void> {
  const binding: Binding = { agentId: opts.agent!, match: matchOf(opts) };
  const current = await ctx.spin('loading bindings', () => load(ctx));
  const rest = current.filter((b) => !same(b, binding));
  if (rest.length === current.length) throw new CliError(`no binding of ${binding.agentId} to ${describe(binding)}`);
  const saved = await ctx.spin('saving bindings', () => save(ctx, rest));
  ctx.printer.done(`unbound ${binding.agentId} from ${describe(binding)}`, saved);
}

async function replaceBindings(ctx: Context, opts: { file: string }): Promise<void> {
  const text = (await ctx.readInput(opts.file)).toString('utf8');
  let value: unknown;
  try {
    value = yaml().parse(text);
  } catch (err) {
    throw new CliError(`${opts.file}: not JSON or YAML: ${(err as Error).message}`);
  }
  const list = Array.isArray(value) ? value : (value as { bindings?: unknown } | null)?.bindings;
  if (!Array.isArray(list)) throw new CliError(`${opts.file}: expected {bindings: [...]} or a list of bindings`);
  const saved = await ctx.spin('saving bindings', () => save(ctx, list as Binding[]));
  ctx.printer.done(`saved ${saved.bindings.length} binding${saved.bindings.length === 1 ? '' : 's'}`, saved);
}

function describe(b: Binding): string {
  if (b.match.default && !b.match.channel) return 'the default';
  return b.match.accountId ? `${b.match.channel} account ${b.match.accountId}` : `every ${b.match.channel} account`;
}
