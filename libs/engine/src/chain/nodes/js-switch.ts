import { jsSwitch } from '../../nodes/js-switch.js';
import { scriptInput } from '../message.js';
import { defineExecutor } from '../types.js';
import { describe } from './js-filter.js';

/** `return ['a', 'b'];` routes along each named relation, in order (a single string is one relation). */
export const jsSwitchExecutor = defineExecutor(jsSwitch, async (msg, config, ctx) => {
  if (!config.jsScript) throw new Error('jsSwitch needs a jsScript that returns relation names');
  const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
  const relations = typeof out === 'string' ? [out] : out;
  if (!Array.isArray(relations) || relations.some((r) => typeof r !== 'string' || r === '')) {
    throw new Error(`jsSwitch: the script must return an array of relation names, not ${describe(out)}`);
  }
  return { msg, relations: [...new Set(relations as string[])] };
});
