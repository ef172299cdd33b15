import type { Command } from 'commander';
import type { RuleListItem } from '@agentry/client';
import { UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import { fieldValidationOption, readDsl, reportReload, writeOptions } from './agents.js';

export function ruleCommands(program: Command, cli: Cli): void {
  const rules = program
    .command('rules')
    .summary('list, show, create, update, delete and reload rule chains')
    .description('Rule chains (RuleGo DSL), agents included, with whether each one loads.');
  examples(rules, 'agentry rules list', 'agentry rules list --failed', 'agentry rules reload triage');

  const list = rules
    .command('list')
    .alias('ls')
    .description('List rule chains (agents included); filter by agent, category, or whether they load.')
    .option('-a, --agent <id>', "only this agent's rules")
    .option('--category <category>', 'only chains of this category (ruleChain.additionalInfo.category)')
    .option('--loaded', 'only chains that load')
    .option('--failed', 'only chains that fail to load')
    .action(
      cli.action(async (ctx, opts: { agent?: string; category?: string; loaded?: boolean; failed?: boolean }) => {
        if (opts.loaded && opts.failed) throw new UsageError('give --loaded or --failed, not both');
        const loaded = opts.loaded ? true : opts.failed ? false : undefined;
        const items = await ctx.spin('loading rule chains', () => ctx.client.rules.list({ agentId: opts.agent, category: opts.category, loaded }));
        ctx.printer.list<RuleListItem>(
          items,
          [
            { header: 'id', value: (r) => r.ruleChain?.id },
            { header: 'name', value: (r) => r.ruleChain?.name },
            { header: 'kind', value: (r) => r.kind },
            { header: 'agent', value: (r) => r.agentId },
            { header: 'loaded', value: (r) => (r.loaded ? 'yes' : 'no') },
            { header: 'error', value: (r) => r.error, max: 70 },
          ],
          'no rule chains',
        );
      }),
    );
  examples(list, 'agentry rules list', 'agentry rules list -a support --json', 'agentry rules list --failed');

  const get = rules
    .command('show')
    .alias('get')
    .description('Print a rule chain (its DSL, JSON).')
    .argument('<id>', 'rule chain id')
    .action(
      cli.action(async (ctx, _opts, id: string) => {
        ctx.printer.json(await ctx.spin('loading the rule chain', () => ctx.client.rules.get(id)));
      }),
    );
  examples(get, 'agentry rules show triage', 'agentry rules show triage > triage.json');

  writeCommands(rules, cli);

  const reload = rules
    .command('reload')
    .description("Drop the chain from every replica's cache and load it again; fails when it does not load.")
    .argument('<id>', 'rule chain id')
    .action(
      cli.action(async (ctx, _opts, id: string) => {
        reportReload(ctx, `rule chain ${id}`, await ctx.spin('reloading', () => ctx.client.rules.reload(id)));
      }),
    );
  examples(reload, 'agentry rules reload triage');
}

/** create, update and delete: a chain's DSL from a file, as for agents. */
function writeCommands(rules: Command, cli: Cli): void {
  const create = rules
    .command('create')
    .description('Create a rule chain from a DSL file (JSON or YAML; "-" reads stdin).')
    .requiredOption('-f, --file <file>', 'the DSL ({ruleChain: {id, name}, metadata: {nodes, connections}})')
    .addOption(fieldValidationOption())
    .action(
      cli.action(async (ctx, opts: { file: string; fieldValidation?: string }) => {
        const dsl = await readDsl(ctx, opts.file);
        const created = await ctx.spin('creating the rule chain', () => ctx.client.rules.create(dsl, writeOptions(opts)));
        ctx.printer.done(`created rule chain ${created.ruleChain.id}`, created);
      }),
    );
  examples(create, 'agentry rules create -f triage.json', 'cat triage.yaml | agentry rules create -f -');

  const update = rules
    .command('update')
    .description("Replace a rule chain with a DSL file (the id is the argument, else the file's ruleChain.id).")
    .argument('[id]', 'rule chain id (default: ruleChain.id of the file)')
    .requiredOption('-f, --file <file>', 'the DSL (JSON or YAML; "-" reads stdin)')
    .addOption(fieldValidationOption())
    .action(
      cli.action(async (ctx, opts: { file: string; fieldValidation?: string }, id: string | undefined) => {
        const dsl = await readDsl(ctx, opts.file);
        const target = id ?? dsl.ruleChain.id;
        if (!target) throw new UsageError('name the rule chain: agentry rules update <id> -f <file>');
        const updated = await ctx.spin('updating the rule chain', () => ctx.client.rules.update(target, { ...dsl, ruleChain: { ...dsl.ruleChain, id: target } }, writeOptions(opts)));
        ctx.printer.done(`updated rule chain ${target}`, updated);
      }),
    );
  examples(update, 'agentry rules update -f triage.json', 'agentry rules update triage -f triage.yaml');

  const del = rules
    .command('delete')
    .alias('rm')
    .description('Delete a rule chain (an agent: "agentry agents delete").')
    .argument('<id>', 'rule chain id')
    .action(
      cli.action(async (ctx, _opts, id: string) => {
        const answer = await ctx.spin('deleting the rule chain', () => ctx.client.rules.delete(id));
        ctx.printer.done(`deleted rule chain ${id}`, answer);
      }),
    );
  examples(del, 'agentry rules delete triage');
}
