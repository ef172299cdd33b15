import { isUtf8 } from 'node:buffer';
import { Option, type Command } from 'commander';
import type { WorkspaceEntry } from '@agentry/client';
import { shortTime } from '../output.js';
import { examples, type Cli } from '../command-kit.js';
import type { Context } from '../context.js';

const agentOption = () => new Option('-a, --agent <id>', 'the agent (env AGENTRY_AGENT; default: the only agent there is)');

/** `mv a/b.md c.md` moves to `c.md` at the root: the server reads a slash-less name as a rename in place. */
function destination(to: string): string {
  return to.includes('/') ? to : `/${to}`;
}

interface AgentOpts {
  agent?: string;
}

export function workspaceCommands(program: Command, cli: Cli): void {
  const ws = program
    .command('workspace')
    .alias('ws')
    .summary("list, read, write, remove and move files of an agent's workspace")
    .description("An agent's workspace: its own file tree on the server. Paths are relative to the workspace root.");
  examples(ws, 'agentry workspace ls -a support', 'agentry workspace cat AGENTS.md -a support', 'agentry workspace put notes/faq.md -f faq.md -a support');

  const ls = ws.command('ls').aliases(['list']).description('List a directory (default: the root).').argument('[path]', 'directory', '').addOption(agentOption()).action(cli.action(listDirectory));
  examples(ls, 'agentry workspace ls -a support', 'agentry workspace ls notes -a support --json');

  const cat = ws
    .command('cat')
    .aliases(['show', 'get'])
    .description('Print a file as it is (bytes included); with --json, {content, encoding?}.')
    .argument('<path>', 'file')
    .addOption(agentOption())
    .action(cli.action(printFile));
  examples(cat, 'agentry workspace cat AGENTS.md -a support', 'agentry workspace cat logo.png -a support > logo.png');

  const put = ws
    .command('put')
    .aliases(['create', 'update'])
    .description('Write a file (created or overwritten; directories above are created) from -f or stdin.')
    .argument('<path>', 'file in the workspace')
    .option('-f, --file <file>', 'local file to upload (default: stdin)')
    .addOption(agentOption())
    .action(cli.action(writeFile));
  examples(put, 'agentry workspace put notes/faq.md -f faq.md -a support', 'echo "be brief" | agentry workspace put STYLE.md -a support');

  const rm = ws.command('rm').aliases(['delete']).description('Remove a file, or a directory with everything in it.').argument('<path>', 'file or directory').addOption(agentOption()).action(cli.action(removePath));
  examples(rm, 'agentry workspace rm notes/old.md -a support');

  const mv = ws
    .command('mv')
    .description('Move or rename a file or directory (both paths from the workspace root; never overwrites).')
    .argument('<from>', 'current path')
    .argument('<to>', 'new path')
    .addOption(agentOption())
    .action(cli.action(movePath));
  examples(mv, 'agentry workspace mv notes/faq.md docs/faq.md -a support', 'agentry workspace mv draft.md final.md -a support');
}

async function listDirectory(ctx: Context, opts: AgentOpts, dir: string): Promise<void> {
  const agent = await ctx.agent(opts.agent);
  const entries = await ctx.spin('listing', () => ctx.client.workspace.list(agent, dir));
  ctx.printer.list<WorkspaceEntry>(
    entries,
    [
      { header: 'name', value: (e) => (e.isDir ? `${e.name}/` : e.name), max: 80 },
      { header: 'size', value: (e) => (e.isDir ? '' : e.size), align: 'right' },
      { header: 'modified', value: (e) => shortTime(e.modTime) },
    ],
    dir ? `${dir} is empty` : 'the workspace is empty',
  );
}

async function printFile(ctx: Context, opts: AgentOpts, file: string): Promise<void> {
  const agent = await ctx.agent(opts.agent);
  const answer = await ctx.spin('reading', () => ctx.client.workspace.read(agent, file));
  // Content is content: JSON only when asked for, even into a pipe.
  if (ctx.options.json) return ctx.printer.json(answer);
  ctx.printer.text(answer.encoding === 'base64' ? Buffer.from(answer.content, 'base64') : answer.content);
}

async function writeFile(ctx: Context, opts: AgentOpts & { file?: string }, file: string): Promise<void> {
  const agent = await ctx.agent(opts.agent);
  const bytes = await ctx.readInput(opts.file ?? '-');
  const content = isUtf8(bytes) ? bytes.toString('utf8') : new Uint8Array(bytes);
  const written = await ctx.spin('writing', () => ctx.client.workspace.write(agent, file, content));
  ctx.printer.done(`wrote ${written.path} (${written.size ?? bytes.byteLength} bytes)`, written);
}

async function removePath(ctx: Context, opts: AgentOpts, file: string): Promise<void> {
  const agent = await ctx.agent(opts.agent);
  const answer = await ctx.spin('removing', () => ctx.client.workspace.delete(agent, file));
  ctx.printer.done(`removed ${file}`, answer);
}

async function movePath(ctx: Context, opts: AgentOpts, from: string, to: string): Promise<void> {
  const agent = await ctx.agent(opts.agent);
  const moved = await ctx.spin('moving', () => ctx.client.workspace.rename(agent, from, destination(to)));
  ctx.printer.done(`moved ${from} to ${moved.path}`, moved);
}
