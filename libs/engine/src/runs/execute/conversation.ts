import type { RunRequest } from '@agentry/contracts';
import { AppError } from '@agentry/errors';
import type { JsonValue, SessionMessage } from '@agentry/db';
import type { AiAgentConfig } from '@agentry/definitions';
import type { ChatMessage, ModelCallRequest } from '../../models/types.js';

/**
 * The `ai/agent` node of an agent's DSL (the first one), or undefined. The stored DSL was
 * validated when it was saved, so this is the one place its configuration is taken as typed.
 */
export function agentNode(dsl: JsonValue): AiAgentConfig | undefined {
  const node = nodesOf(dsl).find((n) => n.type === 'ai/agent');
  return node ? ((node.configuration ?? {}) as AiAgentConfig) : undefined;
}

/** The nodes of a stored DSL (an agent with more than its `ai/agent` node runs as a chain). */
export function nodesOf(dsl: JsonValue): Array<{ type?: string; configuration?: unknown }> {
  return (dsl as { metadata?: { nodes?: Array<{ type?: string; configuration?: unknown }> } } | null)?.metadata?.nodes ?? [];
}

/** What introduces a session's summary in the system message. */
export const SUMMARY_HEADING = 'Summary of the earlier conversation (its messages were compacted):';

/**
 * The conversation sent to the answering agent's model. System prompt: the agent's instructions
 * (`agentInstructions`), then any `system` messages of the request. Without a session, the
 * request's messages are the whole context (as in the OpenAI API). With one, the stored history
 * is the context and only the request's trailing user messages (after its last assistant
 * message) are new, or all of them with `sessionTurns: 'all'`. A compacted session's summary
 * ends the system message: it stands in for the stored messages it covers.
 */
export function buildConversation(
  instructions: string,
  request: RunRequest,
  history: SessionMessage[] | null,
  summary: string | null = null,
): { messages: ChatMessage[]; newTurns: SessionMessage[] } {
  const system = [
    instructions,
    ...request.messages.filter((m) => m.role === 'system').map((m) => m.content),
    ...(summary ? [`${SUMMARY_HEADING}\n${summary}`] : []),
  ]
    .filter((s) => s.trim() !== '')
    .join('\n\n');
  const rest = request.messages.filter((m) => m.role !== 'system');
  const { body, newTurns } =
    history === null ? { body: rest.map(chatMessage), newTurns: [] } : withHistory(rest, history, request.sessionTurns ?? 'trailing');
  const messages: ChatMessage[] = [...(system ? [{ role: 'system' as const, content: system }] : []), ...body];
  return { messages, newTurns };
}

/** A request's message for the model: a client tool exchange keeps its calls and call ids. */
function chatMessage(m: RunRequest['messages'][number]): ChatMessage {
  return {
    role: m.role,
    content: m.content,
    ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}),
    ...(m.tool_call_id !== undefined ? { tool_call_id: m.tool_call_id } : {}),
  };
}

/**
 * A session's turn: the stored history, then the request's new user messages, or the results of
 * the client's tools the previous turn ended with (`role: tool`: the session holds the calls).
 */
function withHistory(
  rest: RunRequest['messages'],
  history: SessionMessage[],
  turns: NonNullable<RunRequest['sessionTurns']>,
): { body: ChatMessage[]; newTurns: SessionMessage[] } {
  const lastAssistant = turns === 'all' ? -1 : rest.map((m) => m.role).lastIndexOf('assistant');
  const trailing = rest.slice(lastAssistant + 1).filter((m) => m.role === 'user' || m.role === 'tool' || turns === 'all');
  const newTurns: SessionMessage[] = trailing.map((m) => ({
    role: m.role,
    content: m.content,
    ...(m.tool_calls?.length ? { toolCalls: m.tool_calls } : {}),
    ...(m.tool_call_id !== undefined ? { toolCallId: m.tool_call_id } : {}),
  }));
  // A window that starts inside a tool exchange would orphan tool results: skip to a clean start.
  let start = 0;
  while (start < history.length && history[start]!.role === 'tool') start++;
  const past: ChatMessage[] = history
    .slice(start)
    .filter((m) => m.role !== 'system')
    .map((m) => ({
      role: m.role as ChatMessage['role'],
      content: m.content,
      ...(m.toolCalls ? { tool_calls: m.toolCalls } : {}),
      ...(m.toolCallId ? { tool_call_id: m.toolCallId } : {}),
    }));
  // A tool result must answer a call the session holds: the model call would fail, in the provider's words.
  const called = new Set([...past, ...trailing].flatMap((m) => ((m.tool_calls ?? []) as Array<{ id?: unknown }>).map((c) => c.id)));
  const orphan = trailing.find((m) => m.role === 'tool' && !called.has(m.tool_call_id));
  if (orphan) {
    throw new AppError('VALIDATION', 400, `the tool result for call "${orphan.tool_call_id ?? ''}" answers no tool call of this session: send it in the session the call was made in`);
  }
  return { body: [...past, ...trailing.map(chatMessage)], newTurns };
}

/** The model parameters of a call: the agent's `params`, overridden by the request's. */
export function modelParams(config: AiAgentConfig, request: Pick<RunRequest, 'params'> | undefined): ModelCallRequest['params'] {
  const p = config.params ?? {};
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const fromAgent = {
    temperature: num(p.temperature),
    top_p: num(p.topP ?? p.top_p),
    max_tokens: num(p.maxTokens ?? p.max_tokens),
    stop: typeof p.stop === 'string' || Array.isArray(p.stop) ? (p.stop as string | string[]) : undefined,
  };
  const merged = { ...fromAgent, ...Object.fromEntries(Object.entries(request?.params ?? {}).filter(([, v]) => v !== undefined)) };
  return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined)) as ModelCallRequest['params'];
}
