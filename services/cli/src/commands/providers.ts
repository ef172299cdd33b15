import type { Command } from 'commander';
import type { Context } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';

/** `/config/models/providers` as the server answers it (the key only as `hasApiKey`). */
export interface Provider {
  id: string;
  name: string;
  base_url: string;
  model: string;
  models: { name: string; alias?: string }[];
  hasApiKey: boolean;
}

export interface ProviderTest {
  ok: boolean;
  latencyMs: number;
  method: 'models' | 'chat';
  models?: string[];
  error?: string;
}

const PATH = '/config/models/providers';
const one = (name: string) => `${PATH}/${encodeURIComponent(name)}`;

export const listProviders = (ctx: Context) => ctx.client.raw<Provider[]>('GET', PATH);
export const testProvider = (ctx: Context, name: string) => ctx.client.raw<ProviderTest>('POST', `${one(name)}/test`);

interface FieldOpts {
  name?: string;
  baseUrl?: string;
  model?: string;
  models?: string;
}

/** The provider fields given as options, in the API's spelling. */
function fields(opts: FieldOpts): Record<string, unknown> {
  return {
    ...(opts.name !== undefined ? { name: opts.name } : {}),
    ...(opts.baseUrl !== undefined ? { base_url: opts.baseUrl } : {}),
    ...(opts.model !== undefined ? { model: opts.model } : {}),
    ...(opts.models !== undefined ? { models: opts.models.split(',').filter(Boolean).map((name) => ({ name: name.trim() })) } : {}),
  };
}

/** A provider key: asked without echo (a line of stdin when it is not a terminal), never an argument (shell history). */
async function askKey(ctx: Context, id: string): Promise<string> {
  const key = (await ctx.prompter.secret(`API key for ${id}: `))?.trim();
  if (!key) throw new UsageError('no API key given');
  return key;
}

export function providerCommands(program: Command, cli: Cli): void {
  const providers = program
    .command('providers')
    .summary('list, show, add, update, test and delete model providers; set their keys')
    .description('Model providers (OpenAI-compatible APIs) agents call; keys are write-only (shown as set or not).');
  examples(providers, 'agentry providers list', 'agentry providers add openai --base-url https://api.openai.com/v1 --model gpt-4o-mini --key', 'agentry providers test openai');

  const list = providers.command('list').alias('ls').description('List the providers.').action(cli.action(printProviders));
  examples(list, 'agentry providers list', 'agentry providers list --json');

  const show = providers.command('show').alias('get').description('Show a provider.').argument('<id>', 'provider id').action(cli.action(showProvider));
  examples(show, 'agentry providers show openai');

  const add = providers
    .command('add')
    .alias('create')
    .description('Add a provider; --key asks for its API key (without echo; from stdin, one line).')
    .argument('<id>', 'provider id (what agents name in "provider")')
    .requiredOption('--base-url <url>', 'the OpenAI-compatible API, e.g. https://api.openai.com/v1')
    .option('--model <name>', 'the default model')
    .option('--models <a,b>', 'the models it offers, comma-separated')
    .option('--name <name>', 'display name')
    .option('--key', 'ask for the API key')
    .option('--default', 'make it the default provider (models.default_provider); the first provider added becomes it anyway')
    .action(cli.action(addProvider));
  examples(add, 'agentry providers add openai --base-url https://api.openai.com/v1 --model gpt-4o-mini --key', 'agentry providers add local --base-url http://127.0.0.1:8000/v1 --model llama --default', 'printf "%s\\n" "$KEY" | agentry providers add local --base-url http://127.0.0.1:8000/v1 --key');

  const update = providers
    .command('update')
    .description('Change a provider: only the fields given change (the key: set-key).')
    .argument('<id>', 'provider id')
    .option('--base-url <url>', 'a new API address')
    .option('--model <name>', 'a new default model')
    .option('--models <a,b>', 'the models it offers, comma-separated')
    .option('--name <name>', 'display name')
    .action(cli.action(updateProvider));
  examples(update, 'agentry providers update openai --model gpt-4o');

  const setKey = providers.command('set-key').description("Set a provider's API key (asked without echo; from stdin, one line).").argument('<id>', 'provider id').action(cli.action(setProviderKey));
  examples(setKey, 'agentry providers set-key openai', 'printf "%s\\n" "$OPENAI_API_KEY" | agentry providers set-key openai');

  const test = providers.command('test').description('Ask the provider whether it answers (its model list, else a one-token chat); exit 1 when it does not.').argument('<id>', 'provider id').action(cli.action(runProviderTest));
  examples(test, 'agentry providers test openai');

  const del = providers.command('delete').alias('rm').description('Delete a provider.').argument('<id>', 'provider id').action(cli.action(deleteProvider));
  examples(del, 'agentry providers delete old-openai');
}

/** The id of models.default_provider ('' when none is set). */
export const defaultProviderId = async (ctx: Context) => (await ctx.client.raw<{ default_provider: string }>('GET', '/config/models')).default_provider;

async function printProviders(ctx: Context): Promise<void> {
  const [items, byDefault] = await ctx.spin('loading providers', () => Promise.all([listProviders(ctx), defaultProviderId(ctx)]));
  ctx.printer.list<Provider>(
    items,
    [
      { header: 'id', value: (p) => (p.id === byDefault ? `${p.id} (default)` : p.id) },
      { header: 'name', value: (p) => p.name },
      { header: 'base url', value: (p) => p.base_url },
      { header: 'model', value: (p) => p.model },
      { header: 'key', value: (p) => (p.hasApiKey ? 'set' : 'none') },
    ],
    'no providers yet: add one with agentry providers add <id> --base-url <url> --model <name> --key',
  );
}

async function showProvider(ctx: Context, _opts: unknown, id: string): Promise<void> {
  // The API has no route for one provider: it is found in the list.
  const p = (await ctx.spin('loading providers', () => listProviders(ctx))).find((x) => x.id === id);
  if (!p) throw new CliError(`Not found: provider "${id}"`);
  if (ctx.json) return ctx.printer.json(p);
  ctx.printer.object({ id: p.id, name: p.name, base_url: p.base_url, model: p.model, models: p.models.map((m) => (m.alias ? `${m.name} (${m.alias})` : m.name)).join(', ') || null, key: p.hasApiKey ? 'set' : 'none' });
}

async function addProvider(ctx: Context, opts: FieldOpts & { key?: boolean; default?: boolean }, id: string): Promise<void> {
  const apiKey = opts.key ? await askKey(ctx, id) : undefined;
  const body = { id, ...fields(opts), ...(apiKey ? { api_key: apiKey } : {}), ...(opts.default ? { default: true } : {}) };
  const created = await ctx.spin('adding the provider', () => ctx.client.raw<Provider>('POST', PATH, { json: body }));
  // The server makes the first provider the default: say so, since agents without a provider use it.
  const isDefault = ctx.json ? false : (await defaultProviderId(ctx).catch(() => '')) === created.id;
  ctx.printer.done(`added provider ${created.id}${created.hasApiKey ? ' (key set)' : ''}${isDefault ? '; it is the default provider' : ''}`, created);
}

async function updateProvider(ctx: Context, opts: FieldOpts, id: string): Promise<void> {
  const change = fields(opts);
  if (Object.keys(change).length === 0) throw new UsageError('give what changes: --base-url, --model, --models or --name');
  const updated = await ctx.spin('updating the provider', () => ctx.client.raw<Provider>('PUT', one(id), { json: change }));
  ctx.printer.done(`updated provider ${updated.id}`, updated);
}

async function setProviderKey(ctx: Context, _opts: unknown, id: string): Promise<void> {
  const apiKey = await askKey(ctx, id);
  const answer = await ctx.spin('setting the key', () => ctx.client.raw<unknown>('PUT', `${one(id)}/api-key`, { json: { apiKey } }));
  ctx.printer.done(`set the API key of provider ${id}`, answer);
}

async function runProviderTest(ctx: Context, _opts: unknown, id: string): Promise<void> {
  const result = await ctx.spin(`testing ${id}`, () => testProvider(ctx, id));
  if (ctx.json) ctx.printer.json(result);
  else if (result.ok) ctx.printer.text(`provider ${id} answers (${result.method}, ${result.latencyMs} ms)\n`);
  if (!result.ok) throw new CliError(`provider ${id} does not answer: ${result.error ?? 'unknown reason'}`);
}

async function deleteProvider(ctx: Context, _opts: unknown, id: string): Promise<void> {
  const answer = await ctx.spin('deleting the provider', () => ctx.client.raw<unknown>('DELETE', one(id)));
  ctx.printer.done(`deleted provider ${id}`, answer);
}
