import type { ResponseFormat } from '@agentry/contracts';

/** What the agent loop sends to a model provider and what comes back. */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** OpenAI `tool_calls` of an assistant message, passed through as given. */
  tool_calls?: unknown;
  tool_call_id?: string;
  name?: string;
}

export interface ModelCallRequest {
  /** Provider id; default `models.default_provider`. */
  provider?: string;
  /** Model name or alias; default the provider's default model. */
  model?: string;
  /** Tried in order when the provider fails before the first token. */
  failover?: Array<{ provider: string; model?: string }>;
  messages: ChatMessage[];
  params?: { temperature?: number; top_p?: number; max_tokens?: number; stop?: string | string[]; response_format?: ResponseFormat };
  /** OpenAI tool definitions, passed through. */
  tools?: unknown[];
  /** OpenAI `tool_choice` and `parallel_tool_calls`, sent only with tools. */
  tool_choice?: unknown;
  parallel_tool_calls?: boolean;
  /** Aborts the HTTP request at once. */
  signal: AbortSignal;
  /** What the call is for, as usage records it: a session summary is `compaction`; default a chat call. */
  purpose?: 'compaction';
}

// Type aliases, not interfaces: callers store these as JSON (an alias fits JsonValue's index signature).
export type ToolCall = {
  id: string;
  name: string;
  /** JSON text, as the model wrote it. */
  arguments: string;
};

export type ModelUsage = {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
};

export type ModelEvent =
  | { type: 'text'; text: string }
  /** The assembled tool calls of the answer: once, before `done`. */
  | { type: 'tool_calls'; calls: ToolCall[] }
  /**
   * The provider's attempt `attempt - 1` failed before its first token and attempt `attempt` of
   * `of` (for this provider) follows after the backoff; `reason` is short and key-free, for a
   * person watching ("provider unreachable"). Never after a text event.
   */
  | { type: 'retry'; attempt: number; of: number; reason: string }
  | { type: 'done'; finishReason: string; provider: string; model: string; usage?: ModelUsage };

export interface ModelTimeouts {
  /** Until the TCP (and TLS) connection stands. */
  connectMs: number;
  /** From sending the request until the first token; also the longest silence between two chunks. */
  firstTokenMs: number;
  /** The whole call, retries and failover included. */
  totalMs: number;
  /** Retries per provider (before the first token only). */
  retries: number;
  /** First backoff; doubled for each further retry. */
  backoffMs: number;
}

export const DEFAULT_MODEL_TIMEOUTS: ModelTimeouts = {
  connectMs: 10_000,
  firstTokenMs: 60_000,
  totalMs: 600_000,
  retries: 2,
  backoffMs: 500,
};
