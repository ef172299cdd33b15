import path from 'node:path';
import { Option, type Command } from 'commander';
import type { AgentListItem, ChainWriteOptions, RuleChainDsl } from '@agentry/client';
import type { Context } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { yaml } from '../lazy.js';
import { examples, intOption, type Cli } from '../command-kit.js';
import { pageOrAll, type PageOpts } from '../page-or-all.js';
import { enableDisableCommands } from '../enable-disable.js';
import { heartbeatCommand } from './heartbeat.js';

/** A rule-chain DSL from a JSON or YAML file (`-` reads stdin). */
export async function readDsl(ctx: Context, file: string): Promise<RuleChainDsl> {
  const text = (await ctx.readInput(file)).toString('utf8');
  let value: unknown;
  try {
    value = /\.ya?ml$/i.test(file) ? yaml().parse(text) : JSON.parse(text);
  } catch (err) {
    // Not JSON: YAML is a superset, so try it before giving up.
    try {
      value = yaml().parse(text);
    } catch {
      throw new CliError(`${file === '-' ? 'stdin' : path.basename(file)}: not JSON or YAML: ${(err as Error).message}`);
    }
  }
  const dsl = value as Partial<RuleChainDsl> | null;
  if (!dsl || typeof dsl !== 'object' || !dsl.ruleChain || typeof dsl.ruleChain !== 'object') {
    throw new CliError(`${file === '-' ? 'stdin' : file}: expected a rule chain ({ruleChain: {id, name}, metadata: {nodes, connections}})`);
  }
  return dsl as RuleChainDsl;
}

/** `--field-validation` of the commands that send a DSL (the server's `?fieldValidation=`). */
export function fieldValidationOption(): Option {
  return new Option('--field-validation <mode>', 'unknown node-configuration fields: Strict refuses them, Warn (the server\'s default) keeps them with a warning, Ignore keeps them silently').choices([
    'Strict',
    'Warn',
    'Ignore',
  ]);
}

/** The query of a chain write from the command's options. */
export function writeOptions(opts: { fieldValidation?: string }): ChainWriteOptions {
  return opts.fieldValidation ? { fieldValidation: opts.fieldValidation as NonNullable<ChainWriteOptions['fieldValidation']> } : {};
}

/**
 * A `{success, message}` answer; `success: false` is a failure (exit 1). The unknown fields the
 * chain keeps (`warnings`) are printed as the warnings of a save are.
 */
export function reportReload(ctx: Context, what: string, answer: { success: boolean; message?: string; warnings?: string[] }): void {
  for (const w of answer.warnings ?? []) ctx.warn(w);
  if (!answer.success) {
    if (ctx.json) ctx.printer.json(answer);
    throw new CliError(`${what} does not load: ${answer.message ?? 'unknown reason'}`);
  }
  ctx.printer.done(`reloaded ${what}`, answer);
}

export function agentCommands(program: Command, cli: Cli): void {
  const agents = program.command('agents').summary('list, show, create, update, enable, disable, delete and reload agents; their heartbeat').description('Agents: rule chains with an ai/agent node; the id is the chat model.');
  examples(agents, 'agentry agents list', 'agentry agents show support > support.json', 'agentry agents update -f support.json');

  const list = agents
    .command('list')
    .alias('ls')
    .description('List the agents (all of them, or one page with --page/--size).')
    .addOption(intOption('--page <n>', 'only this page'))
    .addOption(intOption('--size <n>', 'page size (1..100) with --page'))
    .action(cli.action(listAgents));
  examples(list, 'agentry agents list', 'agentry agents list --json | jq -r ".[].ruleChain.id"');

  const get = agents.command('show').alias('get').description('Print an agent (its rule chain DSL, JSON).').argument('<id>', 'agent id').action(cli.action(printAgent));
  examples(get, 'agentry agents show support', 'agentry agents show support > support.json');

  const create = agents
    .command('create')
    .description('Create an agent from a DSL file (JSON or YAML; "-" reads stdin), or with --id from the server\'s template.')
    .option('-f, --file <file>', 'the agent DSL ({ruleChain: {id, name}, metadata: {nodes, connections}})')
    .option('--id <id>', 'without -f: create this agent from the template (GET /agent-template)')
    .option('--name <name>', 'display name (with --id; default: the id)')
    .addOption(fieldValidationOption())
    .action(cli.action(createAgent));
  examples(create, 'agentry agents create -f support.json', 'agentry agents create --id helper --name "Helper"', 'cat agent.yaml | agentry agents create -f -');

  const update = agents
    .command('update')
    .description('Replace an agent with a DSL file (the id is the argument, else the file\'s ruleChain.id).')
    .argument('[id]', 'agent id (default: ruleChain.id of the file)')
    .requiredOption('-f, --file <file>', 'the agent DSL (JSON or YAML; "-" reads stdin)')
    .addOption(fieldValidationOption())
    .action(cli.action(updateAgent));
  examples(update, 'agentry agents update -f support.json', 'agentry agents update support -f support.yaml');

  const del = agents
    .command('delete')
    .alias('rm')
    .description('Delete an agent with its rules, skills, workspace and cron jobs.')
    .argument('<id>', 'agent id')
    .action(cli.action(deleteAgent));
  examples(del, 'agentry agents delete old-helper');

  enableDisableCommands(agents, cli, {
    description: (disabled) =>
      disabled
        ? 'Disable an agent (ruleChain.disabled): chat to it is refused, it leaves /models, its cron fires are skipped.'
        : 'Enable an agent again (clears ruleChain.disabled).',
    argument: ['<id>', 'agent id'],
    toggle: setAgentDisabled,
    name: (dsl) => `agent ${dsl.ruleChain.id}`,
    example: (command) => `agentry agents ${command} support`,
  });

  const reload = agents
    .command('reload')
    .description('Drop the agent from every replica\'s cache and load it again; fails when it does not load.')
    .argument('<id>', 'agent id')
    .action(cli.action(reloadAgent));
  examples(reload, 'agentry agents reload support');
  heartbeatCommand(agents, cli);
}

async function listAgents(ctx: Context, opts: PageOpts): Promise<void> {
  const items: AgentListItem[] = await pageOrAll(ctx, 'loading agents', opts, {
    page: (page) => ctx.client.agents.list(page),
    all: () => ctx.client.agents.listAll(),
  });
  ctx.printer.list(
    items,
    [
      { header: 'id', value: (a) => a.ruleChain.id },
      { header: 'name', value: (a) => a.ruleChain.name },
      { header: 'enabled', value: (a) => !a.ruleChain.disabled },
    ],
    'no agents yet: create one from the template with agentry agents create --id <id>',
  );
}

async function printAgent(ctx: Context, _opts: unknown, id: string): Promise<void> {
  const agent = await ctx.spin('loading the agent', () => ctx.client.agents.get(id));
  // A program (a pipe, --json) gets the DSL; a person first wants what the agent is, in a few lines.
  if (ctx.printer.jsonMode) return ctx.printer.json(agent);
  ctx.printer.text(agentSummary(agent as unknown as AgentShape));
}

interface AgentShape {
  ruleChain: { id: string; name?: string; disabled?: boolean };
  metadata?: { nodes?: Array<{ id: string; type: string; name?: string; configuration?: Record<string, unknown> }> };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);

/** What an agent is, for a person: its model, tools, skills and prompt; the full DSL is one --json away. */
export function agentSummary(agent: AgentShape): string {
  const nodes = agent.metadata?.nodes ?? [];
  const node = nodes.find((n) => n.type === 'ai/agent');
  const c = node?.configuration ?? {};
  const tools = Array.isArray(c.tools)
    ? (c.tools as Array<{ type?: unknown; name?: unknown }>).map((t) => `${String(t.name ?? '?')}${t.type && t.type !== 'builtin' ? ` (${String(t.type)})` : ''}`)
    : [];
  const skills = Array.isArray(c.skills) ? (c.skills as unknown[]).map((x) => (typeof x === 'string' ? x : String((x as { name?: unknown }).name ?? '?'))) : [];
  const prompt = str(c.systemPrompt)?.replace(/\s+/g, ' ');
  const rows: Array<[string, string]> = [
    ['agent', `${agent.ruleChain.id}${agent.ruleChain.name && agent.ruleChain.name !== agent.ruleChain.id ? ` (${agent.ruleChain.name})` : ''}, ${agent.ruleChain.disabled ? 'disabled' : 'enabled'}`],
    ['model', `${str(c.provider) ?? 'the default provider'}${str(c.model) ? ` / ${String(c.model)}` : ''}`],
    ['tools', tools.length > 0 ? tools.join(', ') : 'none'],
    ['skills', skills.length > 0 ? skills.join(', ') : 'none'],
    ['prompt', prompt ? (prompt.length > 100 ? `${prompt.slice(0, 99)}…` : prompt) : '(none)'],
    ['nodes', `${nodes.length}: ${nodes.map((n) => n.type).join(', ')}`],
  ];
  if (!node) rows.splice(1, 4, ['kind', 'a rule chain without an ai/agent node']);
  const width = Math.max(...rows.map(([k]) => k.length));
  return `${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\nthe whole definition: agentry agents show ${agent.ruleChain.id} --json\n`;
}

async function createAgent(ctx: Context, opts: { file?: string; id?: string; name?: string; fieldValidation?: string }): Promise<void> {
  if ((opts.file === undefined) === (opts.id === undefined)) throw new UsageError('give either -f <file> or --id <id>');
  const dsl = opts.file !== undefined ? await readDsl(ctx, opts.file) : await fromTemplate(ctx, opts.id!, opts.name ?? opts.id!);
  const created = await ctx.spin('creating the agent', () => ctx.client.agents.create(dsl, writeOptions(opts)));
  ctx.printer.done(`created agent ${created.ruleChain.id}`, created);
}

/** The server's agent template under a new id and name (its workspace files are the server's to add). */
async function fromTemplate(ctx: Context, id: string, name: string): Promise<RuleChainDsl> {
  const { workspaceFiles: _files, ...template } = await ctx.spin('loading the template', () => ctx.client.agents.template());
  return { ...template, ruleChain: { ...template.ruleChain, id, name } };
}

async function updateAgent(ctx: Context, opts: { file: string; fieldValidation?: string }, id: string | undefined): Promise<void> {
  const dsl = await readDsl(ctx, opts.file);
  const target = id ?? dsl.ruleChain.id;
  if (!target) throw new UsageError('name the agent: agentry agents update <id> -f <file>');
  const updated = await ctx.spin('updating the agent', () => ctx.client.agents.update(target, { ...dsl, ruleChain: { ...dsl.ruleChain, id: target } }, writeOptions(opts)));
  ctx.printer.done(`updated agent ${target}`, updated);
}

/**
 * The agent's DSL with `ruleChain.disabled` set, written back through the update route: the spec
 * names no agent toggle, and that route already validates, keeps secrets (the markers read here
 * are resolved against the stored values) and tells every replica.
 */
async function setAgentDisabled(ctx: Context, id: string, disabled: boolean): Promise<RuleChainDsl> {
  const dsl = await ctx.client.agents.get(id);
  return ctx.client.agents.update(id, { ...dsl, ruleChain: { ...dsl.ruleChain, disabled } });
}

async function deleteAgent(ctx: Context, _opts: unknown, id: string): Promise<void> {
  const answer = await ctx.spin('deleting the agent', () => ctx.client.agents.delete(id));
  ctx.printer.done(`deleted agent ${id}`, answer);
}

async function reloadAgent(ctx: Context, _opts: unknown, id: string): Promise<void> {
  reportReload(ctx, `agent ${id}`, await ctx.spin('reloading', () => ctx.client.agents.reload(id)));
}
