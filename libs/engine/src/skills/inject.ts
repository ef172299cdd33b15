import type { Logger } from 'pino';
import { listSkills, type Db, type SkillRow } from '@agentry/db';

/**
 * Skills in the system prompt: the names and descriptions of an agent's active skills, in a
 * bounded block; the `skill` tool loads one's content on demand.
 */

/** The default size of the skills block, in characters. */
const DEFAULT_SKILLS_BUDGET_CHARS = 4000;
/** A description longer than this is cut in the block (the skill tool still returns it whole). */
const MAX_SKILL_DESCRIPTION_CHARS = 300;

/**
 * The skills an agent may use: active ones, its own (local) overriding a global one of the same
 * name, minus `disabledSkills`. A local draft does not hide an active global skill. Sorted by name.
 */
export async function activeSkills(
  db: Db,
  agentId: string,
  disabledSkills: readonly string[] = [],
  /** The agent's and the global skills, every status (default: read them; a SkillsCache's `get`). */
  load: (agentId: string) => Promise<SkillRow[] | undefined> = (id) => listSkills(db, { scope: 'all', agentId: id }),
): Promise<SkillRow[]> {
  const disabled = new Set(disabledSkills);
  const byName = new Map<string, SkillRow>();
  for (const skill of (await load(agentId)) ?? []) {
    if (skill.status !== 'active' || disabled.has(skill.name)) continue;
    const seen = byName.get(skill.name);
    if (!seen || (seen.scope === 'global' && skill.scope === 'local')) byName.set(skill.name, skill);
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface SkillsBlockOptions {
  disabledSkills?: readonly string[];
  /** Where the agent's skills come from (default: read them each time). */
  loadSkills?: (agentId: string) => Promise<SkillRow[] | undefined>;
  /** Largest block in characters (default 4000). */
  budgetChars?: number;
  logger?: Pick<Logger, 'warn'>;
}

const HEAD =
  '<available_skills>\n' +
  'Skills hold instructions for particular tasks. When a task matches a skill below, call the `skill` tool with {"skill": "<name>"} ' +
  'to load its instructions, then follow them.\n';
const TAIL = '</available_skills>';

function line(skill: SkillRow): string {
  let description = skill.description.replace(/\s+/g, ' ').trim();
  if (description.length > MAX_SKILL_DESCRIPTION_CHARS) description = `${description.slice(0, MAX_SKILL_DESCRIPTION_CHARS - 1)}…`;
  return description ? `- ${skill.name}: ${description}\n` : `- ${skill.name}\n`;
}

/** Last warning per agent, so an agent over budget warns once per change, not on every turn. */
const warned = new Map<string, string>();
const MAX_WARNED = 1000;

function warnOnce(logger: Pick<Logger, 'warn'> | undefined, agentId: string, dropped: SkillRow[], budget: number): void {
  const signature = dropped.map((s) => `${s.scope}:${s.name}`).join(',');
  if (warned.get(agentId) === signature) return;
  warned.delete(agentId);
  warned.set(agentId, signature);
  if (warned.size > MAX_WARNED) warned.delete(warned.keys().next().value as string);
  logger?.warn(
    { agentId, budgetChars: budget, dropped: dropped.map((s) => s.name) },
    `the skills block is over its budget of ${budget} characters: ${dropped.length} least recently updated skill(s) left out of the system prompt`,
  );
}

/**
 * The block listing the agent's skills as `name: description`, or `''` when it has none. When the
 * block would exceed `budgetChars`, the least recently updated skills are left out (they can still
 * be loaded by name) and one warning is logged.
 */
export async function skillsPromptBlock(db: Db, agentId: string, opts: SkillsBlockOptions = {}): Promise<string> {
  const budget = opts.budgetChars ?? DEFAULT_SKILLS_BUDGET_CHARS;
  const skills = await activeSkills(db, agentId, opts.disabledSkills, opts.loadSkills);
  if (skills.length === 0) return '';

  const newestFirst = [...skills].sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || (a.name < b.name ? -1 : 1));
  const kept: SkillRow[] = [];
  const dropped: SkillRow[] = [];
  let size = HEAD.length + TAIL.length;
  for (const skill of newestFirst) {
    const n = line(skill).length;
    // Once one does not fit, it and every older one stay out: never an older skill for a newer one.
    if (dropped.length === 0 && size + n <= budget) {
      kept.push(skill);
      size += n;
    } else dropped.push(skill);
  }
  if (dropped.length > 0) warnOnce(opts.logger, agentId, dropped, budget);
  else warned.delete(agentId);
  if (kept.length === 0) return '';
  kept.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return `${HEAD}${kept.map(line).join('')}${TAIL}`;
}
