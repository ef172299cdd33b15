import { AiAgentConfiguration, agentConfigProblems, agentUnknownFieldHint, toolCapability } from '../agent-config.js';
import { defineNodeSpec } from './types.js';

/** The `ai/agent` node as a definition holds it; what it does is the engine's `nodes/ai-agent.ts`. */
export const aiAgentSpec = defineNodeSpec({
  type: 'ai/agent',
  description: 'runs an LLM tool loop (the agent)',
  configuration: AiAgentConfiguration,
  validate: agentConfigProblems,
  unknownFieldHint: agentUnknownFieldHint,
  capabilities: (config) => (config.tools ?? []).map(toolCapability),
});
