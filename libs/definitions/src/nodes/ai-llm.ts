import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `ai/llm` node as a definition holds it; what it does is the engine's `nodes/ai-llm.ts`. */
export const aiLlmSpec = defineNodeSpec({
  type: 'ai/llm',
  description: 'one LLM call without tools',
  configuration: Type.Object({
    provider: Type.Optional(Type.String()),
    model: Type.Optional(Type.String()),
    systemPrompt: Type.Optional(Type.String()),
    messages: Type.Optional(Type.Array(Type.Object({ role: Type.String(), content: Type.String() }, { additionalProperties: false }))),
    params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }, { additionalProperties: false }),
});
