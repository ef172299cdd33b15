import { aiAgentSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * The agent: runs the LLM tool loop (`ctx.runAgent`) against a configured provider; its final
 * text becomes the data. Success. The configuration schema lives with the agent code
 * (`@agentry/definitions` `agent-config.ts`), which the worker's loop and the chain context share.
 */
export const aiAgent = defineNodeType({
  ...aiAgentSpec,
  async execute(msg, config, ctx) {
    const text = await ctx.runAgent(config, msg, { id: ctx.node.id, type: ctx.node.type });
    return { msg: { ...msg, data: text }, relation: 'Success' };
  },
});
