import { describeValue, scriptInput } from '../chain/message.js';
import { ScriptError } from '../sandbox/sandbox.js';
import { jsFilterSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * A script returning a boolean (`return <boolean>;`); routes along `True` or `False`. Anything
 * but `true` is False, as in RuleGo; a result that is not a boolean is logged as a warning
 * because it is usually a mistake in the script (`return msg.x` for a missing field).
 */
export const jsFilter = defineNodeType({
  ...jsFilterSpec,
  async execute(msg, config, ctx) {
    if (!config.jsScript) throw new ScriptError('result', 'jsFilter needs a jsScript that returns true or false');
    const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
    if (typeof out !== 'boolean') {
      ctx.logger.warn({ chainId: ctx.chain.id, nodeId: ctx.node.id }, `jsFilter: the script returned ${describeValue(out)}, not true or false; taken as False`);
    }
    return { msg, relation: out === true ? 'True' : 'False' };
  },
});
