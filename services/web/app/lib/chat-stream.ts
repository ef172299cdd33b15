import { apiFetch } from './api';
import { sseData } from './sse';

/** One server-side tool event of the agui protocol (`choices[0].delta.tool_calls[0]`). */
export interface AguiToolEvent {
  type: 'TOOL_CALL_START' | 'TOOL_CALL_RESULT';
  toolCallId: string;
  toolCallName: string;
  arguments?: string;
  content?: string;
  toolType?: string;
  isError?: boolean;
}

export interface ChatHandlers {
  onText(text: string): void;
  onTool(event: AguiToolEvent): void;
}

export class StreamError extends Error {}

interface Chunk {
  error?: { message?: string };
  choices?: Array<{ delta?: { content?: string | null; tool_calls?: AguiToolEvent[] }; finish_reason?: string | null }>;
}

/**
 * Sends one user message to an agent (`model` = agent id) in a session and streams the answer
 * with `X-Stream-Protocol: agui`, so the server's tool calls arrive in order with the text.
 * Resolves with the finish reason at `[DONE]`; rejects with ApiError before the stream,
 * StreamError for an error event or a stream cut short, or the AbortError of `signal`.
 */
export async function streamChat(
  req: { agentId: string; sessionId: string; content: string },
  handlers: ChatHandlers,
  signal: AbortSignal,
): Promise<string> {
  const res = await apiFetch('/chat/completions', {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-stream-protocol': 'agui' },
    body: JSON.stringify({ model: req.agentId, sessionId: req.sessionId, stream: true, messages: [{ role: 'user', content: req.content }] }),
  });
  if (!res.body) throw new StreamError('the answer has no body');
  let finish = 'stop';
  for await (const data of sseData(res.body)) {
    if (data === '[DONE]') return finish;
    let chunk: Chunk;
    try {
      chunk = JSON.parse(data) as Chunk;
    } catch {
      continue;
    }
    if (chunk.error) throw new StreamError(chunk.error.message ?? 'the agent failed');
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    for (const tool of choice.delta?.tool_calls ?? []) {
      if (tool && (tool.type === 'TOOL_CALL_START' || tool.type === 'TOOL_CALL_RESULT')) handlers.onTool(tool);
    }
    const text = choice.delta?.content;
    if (typeof text === 'string' && text) handlers.onText(text);
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  throw new StreamError('the connection closed before the answer was complete');
}
