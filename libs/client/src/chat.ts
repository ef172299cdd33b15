import { StreamError } from './errors.js';
import { parseSse, type SseBody } from './sse.js';

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string;
}

/** `POST /chat/completions`: `model` is the agent id; `sessionId` keeps a conversation. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  sessionId?: string;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  stop?: string | string[];
  stream_options?: { include_usage?: boolean };
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{ index: number; message: { role: 'assistant'; content: string }; finish_reason: string }>;
  usage?: ChatUsage;
}

/** A server-side tool call as the agui protocol (`X-Stream-Protocol: agui`) reports it. */
export interface AguiToolEvent {
  type: 'TOOL_CALL_START' | 'TOOL_CALL_RESULT';
  toolCallId: string;
  toolCallName: string;
  /** JSON text of the arguments; on START. */
  arguments?: string;
  /** The tool's output; on RESULT. */
  content?: string;
  /** On RESULT, when the tool reported a failure. */
  isError?: boolean;
  toolType: string;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: string; content?: string; tool_calls?: AguiToolEvent[] };
    finish_reason: string | null;
  }>;
  usage?: ChatUsage;
}

/** The text fragment of a chunk, or '' when it carries none. */
export function chunkText(chunk: ChatChunk): string {
  return chunk.choices[0]?.delta.content ?? '';
}

/** The agui tool event of a chunk, if it carries one. */
export function chunkToolEvent(chunk: ChatChunk): AguiToolEvent | undefined {
  return chunk.choices[0]?.delta.tool_calls?.[0];
}

/**
 * The chunks of a streamed completion, each as soon as it arrives. Throws StreamError for an
 * `{error}` event (a failure after the stream started) and for a stream that ends without
 * `data: [DONE]`.
 */
export async function* readChatStream(body: SseBody): AsyncGenerator<ChatChunk> {
  let done = false;
  for await (const event of parseSse(body)) {
    if (event.data === '[DONE]') {
      done = true;
      break;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(event.data);
    } catch {
      throw new StreamError(`the server sent an event that is not JSON: ${event.data.slice(0, 200)}`);
    }
    const error = (parsed as { error?: unknown }).error;
    if (error !== undefined) {
      const e = error as { message?: unknown; code?: unknown } | string;
      const message = typeof e === 'string' ? e : typeof e?.message === 'string' ? e.message : JSON.stringify(e);
      const code = typeof e === 'object' && typeof e?.code === 'number' ? e.code : undefined;
      throw new StreamError(message, code);
    }
    yield parsed as ChatChunk;
  }
  if (!done) throw new StreamError('the stream ended before it was complete (no [DONE])');
}
