import { describeValue, scriptInput } from '../chain/message.js';
import { ScriptError } from '../sandbox/sandbox.js';
import { jsSwitchSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * A script returning relation names (`return ['a', 'b'];`); routes along each of them, in order
 * (a single string is one relation).
 */
export const jsSwitch = defineNodeType({
  ...jsSwitchSpec,
  async execute(msg, config, ctx) {
    if (!config.jsScript) throw new ScriptError('result', 'jsSwitch needs a jsScript that returns relation names');
    const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
    const relations = typeof out === 'string' ? [out] : out;
    if (!Array.isArray(relations) || relations.some((r) => typeof r !== 'string' || r === '')) {
      throw new ScriptError('result', `jsSwitch: the script must return an array of relation names, not ${describeValue(out)}`);
    }
    return { msg, relations: [...new Set(relations as string[])] };
  },
});
