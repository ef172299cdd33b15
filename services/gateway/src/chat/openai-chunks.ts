import type { RunEvent } from '@agentry/contracts';

/**
 * What the OpenAI chat surface says, as plain values: completion bodies, `chat.completion.chunk`
 * objects, the AG-UI tool-call extension and stream error events. Pure: no I/O, so the next
 * OpenAI endpoint (Responses) can sit beside it and both are tested without a server.
 */

export type DoneEvent = Extract<RunEvent, { type: 'done' }>;
type ToolStart = Extract<RunEvent, { type: 'tool_start' }>;
type ToolResult = Extract<RunEvent, { type: 'tool_result' }>;

/** What every chunk and completion of one answer repeats. */
export interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

export function usageOf(event: Pick<DoneEvent, 'usage'>) {
  const u = event.usage;
  return { prompt_tokens: u?.promptTokens ?? 0, completion_tokens: u?.completionTokens ?? 0, total_tokens: u?.totalTokens ?? 0 };
}

/**
 * The non-stream answer. `refusal` and `logprobs` are always null (an agent neither refuses as a
 * model does nor reports log probabilities) but present: OpenAI's schema requires both.
 */
export function completion(meta: CompletionMeta, content: string, finishReason: string, usage: DoneEvent['usage'] | null | undefined, toolCalls?: DoneEvent['toolCalls']) {
  // A call of the client's tools: OpenAI's content is null when the model said nothing with it.
  const message = toolCalls?.length
    ? { role: 'assistant', content: content === '' ? null : content, refusal: null, tool_calls: toolCalls.map(openaiToolCall) }
    : { role: 'assistant', content, refusal: null };
  return {
    ...meta,
    object: 'chat.completion',
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
    usage: usageOf({ usage: usage ?? undefined }),
  };
}

type ClientCall = NonNullable<DoneEvent['toolCalls']>[number];

/** A call of the client's tool as OpenAI's `tool_calls` entry. */
export function openaiToolCall(call: ClientCall) {
  return { id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } };
}

/** The streamed delta of one call of the client's tools: the whole call in one delta, at its index. */
export function toolCallDelta(call: ClientCall, index: number): Record<string, unknown> {
  return { tool_calls: [{ index, ...openaiToolCall(call) }] };
}

/** One streamed delta. */
export function chunk(meta: CompletionMeta, delta: Record<string, unknown>, finish: string | null = null) {
  return { ...meta, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] };
}

/**
 * `JSON.stringify(chunk(meta, { content }))` from a template made once per answer: every relayed
 * text event of a stream is this chunk, and only its content changes. The content is the last
 * string of the chunk (the meta's strings come first, and a `"content":""` inside one of them
 * would be escaped), so the template splits there.
 */
export function contentChunkJson(meta: CompletionMeta): (content: string) => string {
  const sample = JSON.stringify(chunk(meta, { content: '' }));
  const at = sample.lastIndexOf('"content":""') + '"content":'.length;
  const head = sample.slice(0, at);
  const tail = sample.slice(at + 2);
  return (content) => head + JSON.stringify(content) + tail;
}

/** The closing usage chunk of `stream_options.include_usage`. */
export function usageChunk(meta: CompletionMeta, usage: DoneEvent['usage'] | null | undefined) {
  return { ...meta, object: 'chat.completion.chunk', choices: [], usage: usageOf({ usage: usage ?? undefined }) };
}

/** A failure after the stream started: OpenAI's error object, typed by who is at fault. */
export function streamError(message: string, status: number | undefined) {
  return { error: { message, type: status && status < 500 ? 'invalid_request_error' : 'server_error', code: status ?? 502 } };
}

/** The AG-UI delta of a tool call starting (`X-Stream-Protocol: agui`). */
export function aguiToolStart(event: ToolStart): Record<string, unknown> {
  return {
    tool_calls: [{ type: 'TOOL_CALL_START', toolCallId: event.toolCallId, toolCallName: event.toolName, arguments: event.arguments, toolType: event.toolType }],
  };
}

/** The AG-UI delta of a tool call's result. */
export function aguiToolResult(event: ToolResult): Record<string, unknown> {
  return {
    tool_calls: [
      {
        type: 'TOOL_CALL_RESULT',
        toolCallId: event.toolCallId,
        toolCallName: event.toolName,
        content: event.content,
        toolType: event.toolType,
        ...(event.isError ? { isError: true } : {}),
      },
    ],
  };
}
