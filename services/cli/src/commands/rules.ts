import type { Command } from 'commander';
import type { RuleListItem } from '@agentry/client';
import { UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import { reportReload } from './agents.js';

export function ruleCommands(program: Command, cli: Cli): void {
  const rules = program
    .command('rules')
    .summary('list, show and reload rule chains')
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
    .command('get')
    .description('Print a rule chain (its DSL, JSON).')
    .argument('<id>', 'rule chain id')
    .action(
      cli.action(async (ctx, _opts, id: string) => {
        ctx.printer.json(await ctx.spin('loading the rule chain', () => ctx.client.rules.get(id)));
      }),
    );
  examples(get, 'agentry rules get triage', 'agentry rules get triage > triage.json');

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
