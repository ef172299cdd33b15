import type { Command } from 'commander';
import type { CronDeliver, CronJob, CronRun } from '@agentry/client';
import { CliError, UsageError } from '../errors.js';
import { shortTime } from '../output.js';
import { examples, intOption, type Cli } from '../command-kit.js';
import type { Context } from '../context.js';
import { enableDisableCommands } from '../enable-disable.js';
import type { PageOpts } from '../page-or-all.js';

/** `platform:accountId:chatId` (the chat id may itself contain colons). */
function parseDeliver(value: string): CronDeliver {
  const [platform, accountId, ...rest] = value.split(':');
  const chatId = rest.join(':');
  if (!platform || !accountId || !chatId) throw new UsageError(`--deliver takes platform:accountId:chatId (got "${value}")`);
  return { platform, accountId, chatId };
}

interface CreateOpts {
  agent: string;
  name: string;
  schedule: string;
  message: string;
  timezone?: string;
  disabled?: boolean;
  deliver?: string;
}

const EXAMPLE_ID = '3f0c2a9e-5b1d-4c1e-9a57-0f6f7e1c2d3b';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A job's id from what a person typed: the id itself, or the job's name (a name is what they
 * gave it; ids are for scripts). Exact names first, then a case-insensitive match; two jobs of
 * one name are refused with their ids; no match goes to the server as an id (404 if unknown).
 */
async function jobId(ctx: Context, idOrName: string): Promise<string> {
  if (UUID.test(idOrName)) return idOrName;
  const jobs = await ctx.spin('finding the job', () => ctx.client.cron.list({}));
  const exact = jobs.filter((j) => j.name === idOrName);
  const found = exact.length > 0 ? exact : jobs.filter((j) => j.name.toLowerCase() === idOrName.toLowerCase());
  if (found.length === 1) return found[0]!.id;
  // Not a name: an id of another shape (`heartbeat:<agent>`), or nothing, which the server says.
  if (found.length === 0) return idOrName;
  throw new CliError(`${found.length} cron jobs are named "${idOrName}" (${found.map((j) => `${j.id} of agent ${j.target}`).join(', ')}): give the id`);
}

export function cronCommands(program: Command, cli: Cli): void {
  const cron = program
    .command('cron')
    .summary('list, show, create, update, enable, disable and delete cron jobs; their runs')
    .description(
      'Cron jobs send a message to an agent on a schedule of six fields:\n' +
        'second minute hour day month weekday (0 30 2 * * * is 02:30:00 every day).',
    );
  examples(cron, 'agentry cron list', 'agentry cron create -a support --name digest --schedule "0 0 9 * * MON-FRI" --message "Send the digest"');

  const list = cron
    .command('list')
    .alias('ls')
    .description('List cron jobs, oldest first.')
    .option('-a, --agent <id>', "only this agent's jobs")
    .action(cli.action(listCronJobs));
  examples(list, 'agentry cron list', 'agentry cron list -a support --json');

  const show = cron.command('show').alias('get').description('Show a cron job.').argument('<job>', 'job id or name').action(cli.action(showCronJob));
  examples(show, 'agentry cron show digest', `agentry cron show ${EXAMPLE_ID}`);

  createCommand(cron, cli);
  updateCommand(cron, cli);
  enableDisableCommands(cron, cli, {
    description: (disabled) => `${disabled ? 'Disable' : 'Enable'} a cron job (from the next tick).`,
    argument: ['<job>', 'job id or name'],
    toggle: async (ctx, job, disabled) => ctx.client.cron.toggle(await jobId(ctx, job), disabled),
    name: (job) => `cron job ${job.id}`,
    example: (command) => `agentry cron ${command} ${EXAMPLE_ID}`,
  });

  const del = cron.command('delete').alias('rm').description('Delete a cron job and its history.').argument('<job>', 'job id or name').action(cli.action(deleteCronJob));
  examples(del, `agentry cron delete ${EXAMPLE_ID}`);

  const runs = cron
    .command('runs')
    .description("A job's fires, newest first (one page: --page, --size; default the latest 20).")
    .argument('<job>', 'job id or name')
    .addOption(intOption('--page <n>', 'page (default 1)'))
    .addOption(intOption('--size <n>', 'fires per page (1..100, default 20)'))
    .action(cli.action(listCronRuns));
  examples(runs, `agentry cron runs ${EXAMPLE_ID}`, `agentry cron runs ${EXAMPLE_ID} --size 100 --json`);
}

function createCommand(cron: Command, cli: Cli): void {
  const create = cron
    .command('create')
    .description('Create a cron job.')
    .requiredOption('-a, --agent <id>', 'the agent the message goes to (the target)')
    .requiredOption('--name <name>', 'a name for the job')
    .requiredOption('--schedule <fields>', 'six fields: second minute hour day month weekday')
    .requiredOption('-m, --message <text>', 'the message sent on every fire')
    .option('--timezone <tz>', 'IANA time zone of the schedule (default UTC)')
    .option('--disabled', 'create it disabled')
    .option('--deliver <platform:account:chat>', "send each answer to this channel chat")
    .action(cli.action(createCronJob));
  examples(
    create,
    'agentry cron create -a support --name digest --schedule "0 0 9 * * MON-FRI" -m "Send the digest" --timezone Europe/Berlin',
    'agentry cron create -a ops --name ping --schedule "0 */5 * * * *" -m "Check the queue" --deliver chat_d:bot:12345',
  );
}

function updateCommand(cron: Command, cli: Cli): void {
  const update = cron
    .command('update')
    .description('Change a cron job: only the fields given change.')
    .argument('<job>', 'job id or name')
    .option('--name <name>', 'a new name')
    .option('--schedule <fields>', 'six fields: second minute hour day month weekday')
    .option('-m, --message <text>', 'the message sent on every fire')
    .option('--timezone <tz>', 'IANA time zone of the schedule')
    .option('--deliver <platform:account:chat>', 'send each answer to this channel chat')
    .action(cli.action(updateCronJob));
  examples(update, `agentry cron update ${EXAMPLE_ID} --schedule "0 0 8 * * *"`, `agentry cron update ${EXAMPLE_ID} -m "Send the short digest"`);
}

async function showCronJob(ctx: Context, _opts: unknown, job: string): Promise<void> {
  const id = await jobId(ctx, job);
  ctx.printer.object(await ctx.spin('loading the job', () => ctx.client.cron.get(id)));
}

async function updateCronJob(ctx: Context, opts: Partial<Omit<CreateOpts, 'agent' | 'disabled'>>, job: string): Promise<void> {
  const change = {
    ...(opts.name !== undefined ? { name: opts.name } : {}),
    ...(opts.schedule !== undefined ? { schedule: opts.schedule } : {}),
    ...(opts.message !== undefined ? { message: opts.message } : {}),
    ...(opts.timezone !== undefined ? { timezone: opts.timezone } : {}),
    ...(opts.deliver !== undefined ? { deliver: parseDeliver(opts.deliver) } : {}),
  };
  if (Object.keys(change).length === 0) throw new UsageError('give what changes: --name, --schedule, -m, --timezone or --deliver');
  const id = await jobId(ctx, job);
  const updated = await ctx.spin('updating the job', () => ctx.client.cron.update(id, change));
  ctx.printer.done(`updated cron job ${updated.id}`, updated);
}

async function listCronJobs(ctx: Context, opts: { agent?: string }): Promise<void> {
  const jobs = await ctx.spin('loading cron jobs', () => ctx.client.cron.list(opts.agent ? { agentId: opts.agent } : {}));
  ctx.printer.list<CronJob>(
    jobs,
    [
      { header: 'id', value: (j) => j.id },
      { header: 'name', value: (j) => j.name, max: 30 },
      { header: 'schedule', value: (j) => j.schedule },
      { header: 'timezone', value: (j) => j.timezone },
      { header: 'agent', value: (j) => j.target },
      { header: 'state', value: (j) => (j.disabled ? 'disabled' : 'enabled') },
      { header: 'next run', value: (j) => shortTime(j.nextRunAt) },
      { header: 'last', value: (j) => j.lastStatus },
    ],
    'no cron jobs yet: create one with agentry cron create -a <agent> --name <name> --schedule "0 0 9 * * *" -m <message>',
  );
}

async function createCronJob(ctx: Context, opts: CreateOpts): Promise<void> {
  const job = await ctx.spin('creating the job', () =>
    ctx.client.cron.create({
      name: opts.name,
      schedule: opts.schedule,
      message: opts.message,
      target: opts.agent,
      ...(opts.timezone ? { timezone: opts.timezone } : {}),
      ...(opts.disabled ? { disabled: true } : {}),
      ...(opts.deliver ? { deliver: parseDeliver(opts.deliver) } : {}),
    }),
  );
  ctx.printer.done(`created cron job ${job.id} (${job.disabled ? 'disabled' : `next run ${shortTime(job.nextRunAt) ?? '-'}`})`, job);
}

async function deleteCronJob(ctx: Context, _opts: unknown, job: string): Promise<void> {
  const id = await jobId(ctx, job);
  const answer = await ctx.spin('deleting the job', () => ctx.client.cron.delete(id));
  ctx.printer.done(`deleted cron job ${id}`, answer);
}

async function listCronRuns(ctx: Context, opts: PageOpts, job: string): Promise<void> {
  const id = await jobId(ctx, job);
  const page = await ctx.spin('loading runs', () => ctx.client.cron.runs(id, { page: opts.page, size: opts.size }));
  ctx.printer.list<CronRun>(
    page.data,
    [
      { header: 'scheduled', value: (r) => shortTime(r.scheduledAt) },
      { header: 'status', value: (r) => r.status },
      { header: 'finished', value: (r) => shortTime(r.finishedAt) },
      { header: 'delivery', value: (r) => r.deliveryStatus },
      { header: 'output / error', value: (r) => r.error ?? r.outputExcerpt, max: 70 },
    ],
    'no runs yet',
  );
}
