import { chunkText, chunkToolEvent, type AguiToolEvent, type RetryNotice } from '@agentry/client';
import { client } from './api';

export interface ChatHandlers {
  onText(text: string): void;
  onTool(event: AguiToolEvent): void;
  /** The connection dropped and the stream went on over a new one (`resumes`: 1, 2, ...); nothing was lost. */
  onResume?(resumes: number): void;
  /** The server tries the model provider again before the answer started (attempt 2 of 3, and why). */
  onRetry?(notice: RetryNotice): void;
}

/**
 * Sends one user message to an agent (`model` = agent id) in a session and streams the answer
 * with `X-Stream-Protocol: agui`, so the server's tool calls arrive in order with the text.
 * Resolves with the finish reason at `[DONE]`; rejects with ApiError before the stream,
 * StreamError (from the client) for an error event or a stream that could not be resumed, or
 * the AbortError of `signal`. A dropped connection is resumed by the client (a laptop that
 * changed networks, a proxy that restarted): the answer goes on where it stopped.
 */
export async function streamChat(
  req: { agentId: string; sessionId: string; content: string },
  handlers: ChatHandlers,
  signal: AbortSignal,
): Promise<string> {
  const chunks = await client.chat.stream(
    { model: req.agentId, sessionId: req.sessionId, messages: [{ role: 'user', content: req.content }] },
    { agui: true, signal, ...(handlers.onResume ? { onResume: handlers.onResume } : {}), ...(handlers.onRetry ? { onRetry: handlers.onRetry } : {}) },
  );
  let finish = 'stop';
  for await (const chunk of chunks) {
    const tool = chunkToolEvent(chunk);
    if (tool && (tool.type === 'TOOL_CALL_START' || tool.type === 'TOOL_CALL_RESULT')) handlers.onTool(tool);
    const text = chunkText(chunk);
    if (text) handlers.onText(text);
    const reason = chunk.choices[0]?.finish_reason;
    if (reason) finish = reason;
  }
  return finish;
}
