import { aiAgent } from '../../nodes/ai-agent.js';
import { defineExecutor } from '../types.js';

/** Runs the agent (`ctx.runAgent`, the tool loop); its final text becomes the data. Success. */
export const aiAgentExecutor = defineExecutor(aiAgent, async (msg, config, ctx) => {
  const text = await ctx.runAgent(config, msg);
  return { msg: { ...msg, data: text }, relation: 'Success' };
});
