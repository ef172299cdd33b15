import { describeValue, scriptInput, toMetadataValue, toMsgData } from '../chain/message.js';
import { ScriptError } from '../sandbox/sandbox.js';
import { jsTransformSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * A script returning `{msg, metadata, msgType}` that replaces the message: `msg` becomes the data
 * (JSON unless it is a string), `metadata` the metadata (values made strings), `msgType` the
 * type. A field left out keeps its old value. Without a script the message passes unchanged.
 */
export const jsTransform = defineNodeType({
  ...jsTransformSpec,
  async execute(msg, config, ctx) {
    if (!config.jsScript) return { msg, relation: 'Success' };
    const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
    if (out === null || typeof out !== 'object' || Array.isArray(out)) {
      throw new ScriptError('result', `jsTransform: the script must return an object {msg, metadata, msgType}, not ${describeValue(out)}`);
    }
    const o = out as Record<string, unknown>;
    const next = { ...msg, metadata: { ...msg.metadata } };
    if ('msg' in o) next.data = toMsgData(o.msg);
    if ('msgType' in o) next.type = toMetadataValue(o.msgType);
    if ('metadata' in o) {
      const m = o.metadata;
      if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new ScriptError('result', `jsTransform: metadata must be an object, not ${describeValue(m)}`);
      next.metadata = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, toMetadataValue(v)]));
    }
    return { msg: next, relation: 'Success' };
  },
});
