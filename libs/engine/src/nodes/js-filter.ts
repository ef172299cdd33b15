import Type from 'typebox';
import { describeValue, scriptInput } from '../chain/message.js';
import { ScriptError } from '../sandbox/sandbox.js';
import { defineNodeType } from './types.js';

/** A script returning a boolean (`return <boolean>;`); routes along `True` or `False`. */
export const jsFilter = defineNodeType({
  type: 'jsFilter',
  description: 'routes along True or False by the result of a script',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }, { additionalProperties: false }),
  async execute(msg, config, ctx) {
    if (!config.jsScript) throw new ScriptError('result', 'jsFilter needs a jsScript that returns true or false');
    const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
    if (typeof out !== 'boolean') throw new ScriptError('result', `jsFilter: the script must return true or false, not ${describeValue(out)}`);
    return { msg, relation: out ? 'True' : 'False' };
  },
});
