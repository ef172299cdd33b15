import Type from 'typebox';
import { defineNodeType } from './types.js';

const Params = Type.Record(Type.String(), Type.Unknown(), {
  description: 'temperature, topP, maxTokens, stop, responseFormat, ... passed to the provider',
});

const Tool = Type.Object({
  /** builtin | rulechain | agent | mcp (the engine issue decides the exact set). */
  type: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  description: Type.Optional(Type.String()),
  targetId: Type.Optional(Type.String()),
  timeout: Type.Optional(Type.Integer({ minimum: 1 })),
});

const Failover = Type.Object({
  provider: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
  params: Type.Optional(Params),
});

/** The agent: an LLM tool loop against a configured provider. Permissive until the engine issue. */
export const aiAgent = defineNodeType({
  type: 'ai/agent',
  description: 'runs an LLM tool loop (the agent)',
  configuration: Type.Object({
    provider: Type.Optional(Type.String({ description: 'provider id; models.default_provider when absent' })),
    model: Type.Optional(Type.String()),
    systemPrompt: Type.Optional(Type.String()),
    params: Type.Optional(Params),
    maxStep: Type.Optional(Type.Integer({ minimum: 1 })),
    maxToolOutputLength: Type.Optional(Type.Integer({ minimum: 1 })),
    tools: Type.Optional(Type.Array(Tool)),
    failover: Type.Optional(Type.Array(Failover)),
    disabledSkills: Type.Optional(Type.Array(Type.String())),
  }),
});
