import Type from 'typebox';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    skill: Type.String({ minLength: 1, maxLength: 64, description: 'the name of the skill to load, as listed in <available_skills>' }),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  disabledSkills: Type.Optional(Type.Array(Type.String(), { description: 'skills this agent may not load (the ai/agent node\'s disabledSkills)' })),
});

/** The `skill` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const skillSpec = defineToolSpec({
  name: 'skill',
  description:
    'Load the full instructions of one of your skills by name (the names are listed in <available_skills> in your instructions). ' +
    'Call it before working on a task a skill covers, then follow what it says.',
  parameters: Parameters,
  configSchema: Config,
});
