import { renderTemplate } from '../chain/placeholders.js';
import type { ChatMessage } from '../models/types.js';
import { aiLlmSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

const ROLES = new Set(['system', 'user', 'assistant']);

/**
 * One completion without tools: `systemPrompt`, then `messages` (each content a template:
 * `${msg}`, `${msg.field}`, `${metadata.x}`), or the message data as the user message when there
 * are none. The answer's text becomes the data. Success.
 */
export const aiLlm = defineNodeType({
  ...aiLlmSpec,
  async execute(msg, config, ctx) {
    const messages: ChatMessage[] = [];
    if (config.systemPrompt) messages.push({ role: 'system', content: renderTemplate(config.systemPrompt, msg) });
    if (config.messages && config.messages.length > 0) {
      for (const m of config.messages) {
        if (!ROLES.has(m.role)) throw new Error(`ai/llm: message role "${m.role}" is not one of system, user, assistant`);
        messages.push({ role: m.role as ChatMessage['role'], content: renderTemplate(m.content, msg) });
      }
    } else {
      messages.push({ role: 'user', content: msg.data });
    }
    const text = await ctx.complete({
      ...(config.provider ? { provider: config.provider } : {}),
      ...(config.model ? { model: config.model } : {}),
      messages,
      ...(config.params ? { params: config.params } : {}),
      signal: ctx.signal,
    });
    return { msg: { ...msg, data: text }, relation: 'Success' };
  },
});
