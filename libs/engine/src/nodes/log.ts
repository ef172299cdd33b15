import { scriptInput } from '../chain/message.js';
import { logSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * Writes an info line through the run's logger: the text the jsScript returns (RuleGo's
 * `return 'Incoming message: ' + JSON.stringify(msg);`), else the message itself. Success.
 */
export const log = defineNodeType({
  ...logSpec,
  async execute(msg, config, ctx) {
    const where = { chainId: ctx.chain.id, nodeId: ctx.node.id, msgId: msg.id, msgType: msg.type };
    if (config.jsScript) {
      const out = await ctx.sandbox.run(config.jsScript, scriptInput(msg), { signal: ctx.signal });
      ctx.logger.info(where, typeof out === 'string' ? out : (JSON.stringify(out) ?? 'undefined'));
    } else {
      ctx.logger.info({ ...where, data: msg.data, metadata: msg.metadata }, 'rule chain message');
    }
    return { msg, relation: 'Success' };
  },
});
