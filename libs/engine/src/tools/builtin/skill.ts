import type { Static } from 'typebox';
import { activeSkills } from '../../skills/inject.js';
import { ToolError } from '../types.js';
import { skillSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, type BuiltinTool } from './common.js';

const Parameters = skillSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = skillSpec.configSchema;
type Config = Static<typeof Config>;

export const skillTool: BuiltinTool = {
  ...skillSpec,
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
