import type { AiAgentConfig } from '@agentry/definitions';
import { agentSystemPrompt } from '../../agent/prompt.js';
import type { ChatMessage } from '../../models/types.js';
import type { RunDeps } from './deps.js';

/**
 * The instructions an agent runs with: its `systemPrompt` with the templates rendered against
 * the workspace of `agentId`, then the block of its skills (`disabledSkills` left out). Every
 * agent of a run gets them from here: the answering agent, a sub-agent called as a tool, and a
 * silent `ai/agent` node (after the answer, or inside a rule-chain tool). Before, the silent ones
 * got the raw template with no skills, so `${include(...)}` reached the model as written.
 * `agentId` is the agent on whose behalf the config runs: its own id for an agent, the calling
 * agent's for an `ai/agent` node of a rule chain (the chain has no workspace of its own).
 */
export function agentInstructions(deps: Pick<RunDeps, 'db' | 'logger' | 'loadSkills'>, config: AiAgentConfig, agentId: string): Promise<string> {
  return agentSystemPrompt(config, { db: deps.db, agentId, logger: deps.logger, loadSkills: (id) => deps.loadSkills(id) });
}

/**
 * The one-turn conversation of an agent that does not answer the client: its instructions and
 * `text` as the user's turn. The client's own system messages are not added: they address the
 * agent the client called, not the ones it calls.
 */
export async function silentConversation(
  deps: Pick<RunDeps, 'db' | 'logger' | 'loadSkills'>,
  config: AiAgentConfig,
  agentId: string,
  text: string,
): Promise<ChatMessage[]> {
  const instructions = await agentInstructions(deps, config, agentId);
  return [...(instructions ? [{ role: 'system' as const, content: instructions }] : []), { role: 'user', content: text }];
}
