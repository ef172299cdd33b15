import { Option, type Command } from 'commander';
import type { UsageGroupBy, UsageRow } from '@agentry/client';
import { examples, type Cli } from '../command-kit.js';
import { shortTime } from '../output.js';

interface UsageOpts {
  groupBy: UsageGroupBy;
  from?: string;
  to?: string;
  principal?: string;
}

const GROUPS: readonly UsageGroupBy[] = ['agent', 'principal', 'provider', 'day', 'kind'];

/** `agentry usage`: token totals from `GET /usage`, a table with a total line, or the report as JSON. */
export function usageCommands(program: Command, cli: Cli): void {
  const usage = program
    .command('usage')
    .summary('tokens used, by agent, principal, provider or day')
    .description('Tokens used by model calls, totalled per group over a window (default the last 30 days). Users see their own usage; admins everyone\'s.')
    .addOption(new Option('-g, --group-by <group>', 'what a row totals').choices(GROUPS).default('day'))
    .option('--from <date>', 'start, ISO 8601 date or time (inclusive; default 30 days before --to)')
    .option('--to <date>', 'end, ISO 8601 time (exclusive) or date (the whole day included; default now)')
    .option('--principal <who>', 'admins: only this principal (user:<name>, api:<account>)')
    .action(
      cli.action(async (ctx, opts: UsageOpts) => {
        const report = await ctx.spin('loading usage', () =>
          ctx.client.usage.get({
            groupBy: opts.groupBy,
            ...(opts.from ? { from: opts.from } : {}),
            ...(opts.to ? { to: opts.to } : {}),
            ...(opts.principal !== undefined ? { principal: opts.principal } : {}),
          }),
        );
        if (ctx.printer.jsonMode) return ctx.printer.json(report);
        // The window as people read times (the JSON keeps the ISO instants).
        ctx.printer.note(`by ${report.groupBy}, from ${shortTime(report.from)} to ${shortTime(report.to)} UTC`);
        const total = report.data.reduce(
          (t, r) => ({ key: 'total', promptTokens: t.promptTokens + r.promptTokens, completionTokens: t.completionTokens + r.completionTokens, totalTokens: t.totalTokens + r.totalTokens, requests: t.requests + r.requests }),
          { key: 'total', promptTokens: 0, completionTokens: 0, totalTokens: 0, requests: 0 },
        );
        ctx.printer.list<UsageRow>(
          report.data.length > 0 ? [...report.data, total] : [],
          [
            // The principal of channel and cron runs is empty.
            { header: report.groupBy, value: (r) => r.key || '(none)', max: 48 },
            { header: 'prompt', value: (r) => r.promptTokens, align: 'right' },
            { header: 'completion', value: (r) => r.completionTokens, align: 'right' },
            { header: 'total', value: (r) => r.totalTokens, align: 'right' },
            { header: 'calls', value: (r) => r.requests, align: 'right' },
          ],
          'no usage in this window',
        );
      }),
    );
  examples(usage, 'agentry usage', 'agentry usage --group-by agent --from 2026-11-01 --to 2026-11-30', 'agentry usage -g principal --json');
}
