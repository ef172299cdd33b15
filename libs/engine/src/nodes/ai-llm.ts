import Type from 'typebox';
import { defineNodeType } from './types.js';

/** One LLM call without tools. */
export const aiLlm = defineNodeType({
  type: 'ai/llm',
  description: 'one LLM call without tools',
  configuration: Type.Object({
    provider: Type.Optional(Type.String()),
    model: Type.Optional(Type.String()),
    systemPrompt: Type.Optional(Type.String()),
    messages: Type.Optional(Type.Array(Type.Object({ role: Type.String(), content: Type.String() }))),
    params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
});
