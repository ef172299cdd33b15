import { jsFilter } from '../../nodes/js-filter.js';
import { scriptInput } from '../message.js';
import { defineExecutor } from '../types.js';

/** `return <boolean>;` routes along `True` or `False`. */
export const jsFilterExecutor = defineExecutor(jsFilter, async (msg, config, ctx) => {
  if (!config.jsScript) throw new Error('jsFilter needs a jsScript that returns true or false');
  const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
  if (typeof out !== 'boolean') throw new Error(`jsFilter: the script must return true or false, not ${describe(out)}`);
  return { msg, relation: out ? 'True' : 'False' };
});

export function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
