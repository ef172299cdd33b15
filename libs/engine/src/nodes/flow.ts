import Type from 'typebox';
import { defineNodeType } from './types.js';

/**
 * Runs chain `targetId` with the message (through `ctx.runChain`); its result goes on along
 * `Success`, its failure along `Failure`. Nesting stops at `maxFlowDepth` (default 5) with an
 * error that names the chain path, which shows a cycle. `extend` is accepted and has no effect:
 * the sub-chain's result message always continues.
 */
export const flow = defineNodeType({
  type: 'flow',
  description: 'runs another rule chain',
  configuration: Type.Object({
    targetId: Type.String({ minLength: 1, description: 'id of the chain to run' }),
    extend: Type.Optional(Type.Boolean()),
  }, { additionalProperties: false }),
  async execute(msg, config, ctx) {
    const path = [...ctx.path, config.targetId];
    if (ctx.depth + 1 > ctx.maxFlowDepth) {
      throw new Error(`sub-chain depth limit ${ctx.maxFlowDepth} exceeded (${path.join(' -> ')}); do the chains call each other in a cycle?`);
    }
    const out = await ctx.runChain(config.targetId, msg, ctx.depth + 1, path);
    return { msg: out, relation: 'Success' };
  },
});
