import path from 'node:path';
import { Option, type Command } from 'commander';
import type { Skill, SkillScope, SkillSelector } from '@agentry/client';
import { UsageError } from '../errors.js';
import { shortTime } from '../output.js';
import { examples, type Cli } from '../command-kit.js';
import type { Context } from '../context.js';

interface ScopeOpts {
  agent?: string;
  global?: boolean;
}

/** `-a agent` selects the agent's private (local) skill; `--global` the global one. */
function selector(opts: ScopeOpts): SkillSelector {
  if (opts.agent && opts.global) throw new UsageError('give -a <agent> (a local skill) or --global, not both');
  return opts.agent ? { scope: 'local', agentId: opts.agent } : { scope: 'global' };
}

const agentOption = () => new Option('-a, --agent <id>', "the agent whose private (local) skill this is; default: a global skill");

interface CreateOpts extends ScopeOpts {
  file: string;
  description?: string;
  draft?: boolean;
}

export function skillCommands(program: Command, cli: Cli): void {
  const skills = program
    .command('skills')
    .summary('list, show, create, update, delete and upload skills')
    .description('Skills: Markdown instructions agents load on demand; global, or private to one agent (-a).');
  examples(skills, 'agentry skills list', 'agentry skills create summarise -f SKILL.md', 'agentry skills upload skills.zip -a support');

  const list = skills
    .command('list')
    .alias('ls')
    .description('List skills: every scope by default; with -a, the skills that agent sees (global and its own).')
    .addOption(new Option('--scope <scope>', 'which skills').choices(['all', 'global', 'local']).default('all'))
    .option('-a, --agent <id>', 'only this agent\'s local skills (and the global ones unless --scope local)')
    .action(cli.action(listSkills));
  examples(list, 'agentry skills list', 'agentry skills list --scope local -a support');

  const get = skills
    .command('show')
    .alias('get')
    .description('Show a skill; on a terminal its description and content, else JSON.')
    .argument('<name>', 'skill name')
    .addOption(agentOption())
    .option('--global', 'the global skill (the default)')
    .action(cli.action(showSkill));
  examples(get, 'agentry skills show summarise', 'agentry skills show triage -a support --json');

  const create = skills
    .command('create')
    .description('Create a skill from a Markdown file (a SKILL.md\'s front matter `name`, `description` fills the description).')
    .argument('[name]', 'skill name (default: the file name without .md, or its directory for SKILL.md)')
    .requiredOption('-f, --file <file>', 'the skill\'s Markdown ("-" reads stdin)')
    .option('-d, --description <text>', 'description (default: from the front matter)')
    .addOption(agentOption())
    .option('--draft', 'create it as a draft')
    .action(cli.action(createSkill));
  examples(create, 'agentry skills create summarise -f summarise.md', 'agentry skills create -f skills/triage/SKILL.md -a support');

  const update = skills
    .command('update')
    .description("Change a skill: its content from a Markdown file, its description, or whether it is a draft.")
    .argument('<name>', 'skill name')
    .option('-f, --file <file>', 'the new Markdown ("-" reads stdin)')
    .option('-d, --description <text>', 'a new description')
    .addOption(new Option('--status <status>', 'active or draft').choices(['active', 'draft']))
    .addOption(agentOption())
    .option('--global', 'the global skill (the default)')
    .action(cli.action(updateSkill));
  examples(update, 'agentry skills update summarise -f summarise.md', 'agentry skills update triage -a support --status draft');

  const del = skills
    .command('delete')
    .alias('rm')
    .description('Delete a skill.')
    .argument('<name>', 'skill name')
    .addOption(agentOption())
    .option('--global', 'the global skill (the default)')
    .action(cli.action(deleteSkill));
  examples(del, 'agentry skills delete summarise', 'agentry skills delete triage -a support');

  const upload = skills
    .command('upload')
    .description('Upload a zip of skills (<name>/SKILL.md or <name>.md entries), written all or nothing.')
    .argument('<zip>', 'the archive ("-" reads stdin)')
    .addOption(agentOption())
    .action(cli.action(uploadSkills));
  examples(upload, 'agentry skills upload skills.zip', 'agentry skills upload team-skills.zip -a support');
}

async function listSkills(ctx: Context, opts: { scope: SkillScope | 'all'; agent?: string }): Promise<void> {
  const items = await ctx.spin('loading skills', () => ctx.client.skills.listAll({ scope: opts.scope, ...(opts.agent ? { agentId: opts.agent } : {}) }));
  ctx.printer.list<Skill>(
    items,
    [
      { header: 'name', value: (s) => s.name },
      { header: 'scope', value: (s) => s.scope },
      { header: 'agent', value: (s) => s.agentId },
      { header: 'status', value: (s) => s.status },
      { header: 'updated', value: (s) => shortTime(s.updatedAt) },
      { header: 'description', value: (s) => s.description, max: 70 },
    ],
    'no skills yet: create one with agentry skills create -f SKILL.md',
  );
}

async function showSkill(ctx: Context, opts: ScopeOpts, name: string): Promise<void> {
  const skill = await ctx.spin('loading the skill', () => ctx.client.skills.get(name, selector(opts)));
  if (ctx.json) return ctx.printer.json(skill);
  const scope = skill.scope === 'local' ? `local to ${skill.agentId}` : 'global';
  ctx.printer.text(`# ${skill.name} (${scope}, ${skill.status})\n${skill.description ? `${skill.description}\n` : ''}\n${skill.content ?? ''}\n`);
}

async function createSkill(ctx: Context, opts: CreateOpts, name: string | undefined): Promise<void> {
  const skillName = name || skillNameOf(ctx, opts.file);
  const content = (await ctx.readInput(opts.file)).toString('utf8');
  const skill = await ctx.spin('creating the skill', () =>
    ctx.client.skills.create({
      name: skillName,
      content,
      ...(opts.description !== undefined ? { description: opts.description } : {}),
      ...(opts.draft ? { status: 'draft' as const } : {}),
      ...selector(opts),
    }),
  );
  ctx.printer.done(`created ${skill.scope} skill ${skill.name}${skill.agentId ? ` of ${skill.agentId}` : ''}`, skill);
}

/** A skill's default name: its file's without .md, or its directory's for a SKILL.md. */
function skillNameOf(ctx: Context, file: string): string {
  if (file === '-') throw new UsageError('name the skill when reading stdin: agentry skills create <name> -f -');
  const base = path.basename(file).replace(/\.md$/i, '');
  return base.toUpperCase() === 'SKILL' ? path.basename(path.dirname(path.resolve(ctx.setup.cwd, file))) : base;
}

async function updateSkill(ctx: Context, opts: ScopeOpts & { file?: string; description?: string; status?: 'active' | 'draft' }, name: string): Promise<void> {
  const content = opts.file !== undefined ? (await ctx.readInput(opts.file)).toString('utf8') : undefined;
  const change = {
    ...(content !== undefined ? { content } : {}),
    ...(opts.description !== undefined ? { description: opts.description } : {}),
    ...(opts.status !== undefined ? { status: opts.status } : {}),
  };
  if (Object.keys(change).length === 0) throw new UsageError('give what changes: -f <file>, -d <text> or --status');
  const skill = await ctx.spin('updating the skill', () => ctx.client.skills.update(name, { ...change, ...selector(opts) }));
  ctx.printer.done(`updated ${skill.scope} skill ${skill.name}`, skill);
}

async function deleteSkill(ctx: Context, opts: ScopeOpts, name: string): Promise<void> {
  const answer = await ctx.spin('deleting the skill', () => ctx.client.skills.delete(name, selector(opts)));
  ctx.printer.done(`deleted skill ${name}`, answer);
}

async function uploadSkills(ctx: Context, opts: ScopeOpts, zip: string): Promise<void> {
  const bytes = await ctx.readInput(zip);
  const result = await ctx.spin('uploading', () => ctx.client.skills.upload(bytes, { ...selector(opts), filename: zip === '-' ? 'skills.zip' : path.basename(zip) }));
  if (ctx.json) return ctx.printer.json(result);
  const lines = [`created: ${result.created.join(', ') || '-'}`, `updated: ${result.updated.join(', ') || '-'}`];
  for (const s of result.skipped) lines.push(`skipped ${s.entry}: ${s.reason}`);
  ctx.printer.text(`${lines.join('\n')}\n`);
}
