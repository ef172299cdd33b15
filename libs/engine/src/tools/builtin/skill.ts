import Type, { type Static } from 'typebox';
import { activeSkills } from '../../skills/inject.js';
import { ToolError } from '../types.js';
import { checkArgs, checkConfig, type BuiltinTool } from './common.js';

const Parameters = Type.Object(
  {
    skill: Type.String({ minLength: 1, maxLength: 64, description: 'the name of the skill to load, as listed in <available_skills>' }),
  },
  { additionalProperties: false },
);
type Args = Static<typeof Parameters>;

const Config = Type.Object({
  disabledSkills: Type.Optional(Type.Array(Type.String(), { description: 'skills this agent may not load (the ai/agent node\'s disabledSkills)' })),
});
type Config = Static<typeof Config>;

export const skillTool: BuiltinTool = {
  name: 'skill',
  description:
    'Load the full instructions of one of your skills by name (the names are listed in <available_skills> in your instructions). ' +
    'Call it before working on a task a skill covers, then follow what it says.',
  parameters: Parameters,
  configSchema: Config,
  async run(raw, ctx) {
    const args = checkArgs<Args>('skill', Parameters, raw);
    const cfg = checkConfig<Config>('skill', Config, ctx.config);
    const skills = await activeSkills(ctx.db, ctx.agentId, cfg.disabledSkills ?? []);
    const skill = skills.find((s) => s.name === args.skill);
    if (!skill) {
      const names = skills.map((s) => s.name);
      const list = names.length === 0 ? 'this agent has no skills' : `available: ${names.slice(0, 50).join(', ')}${names.length > 50 ? ', ...' : ''}`;
      throw new ToolError(`skill "${args.skill}" not found (${list})`);
    }
    const head = `# Skill: ${skill.name}${skill.description ? `\n\n${skill.description}` : ''}`;
    return `${head}\n\n${skill.content}`;
  },
};
