import type { ResponseFunctionCall, ResponseFunctionTool, ResponseObject, ResponseOutputMessage, ResponseTextFormat, ResponseUsage } from '@agentry/contracts';
import type { DoneEvent } from './openai-chunks.js';

/**
 * What the OpenAI Responses API says, as plain values: the `Response` object and the stream's
 * events, numbered by `sequence_number`. Pure, like openai-chunks.ts beside it: the writer
 * (responses-answer.ts) decides when each is sent.
 */

/** What every `Response` of one answer repeats: the request's settings, echoed as OpenAI does. */
export interface ResponseMeta {
  id: string;
  /** The one output message's id. */
  itemId: string;
  createdAt: number;
  model: string;
  instructions: string | null;
  previousResponseId: string | null;
  store: boolean;
  temperature: number | null;
  topP: number | null;
  maxOutputTokens: number | null;
  toolChoice: ResponseObject['tool_choice'];
  /** The client's function tools, echoed. */
  tools: ResponseFunctionTool[];
  parallelToolCalls: boolean;
  metadata: Record<string, string>;
  /** The request's `text.format`, echoed as OpenAI does. */
  textFormat: ResponseTextFormat;
  /** `background: true`: the run lives without its client. */
  background: boolean;
}

/** `resp_<runId>`: the run row is where a later `previous_response_id` is looked up. */
export const responseIdOf = (runId: string) => `resp_${runId}`;
/** The run id in a response id, or undefined when it is not one of ours. */
export const runIdOfResponse = (id: string) => /^resp_([0-9a-f]{32})$/.exec(id)?.[1];

export function responseUsage(usage: DoneEvent['usage'] | null | undefined): ResponseUsage {
  return {
    input_tokens: usage?.promptTokens ?? 0,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: usage?.completionTokens ?? 0,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage?.totalTokens ?? 0,
  };
}

export function outputMessage(meta: ResponseMeta, text: string | null, status: ResponseOutputMessage['status']): ResponseOutputMessage {
  return {
    type: 'message',
    id: meta.itemId,
    role: 'assistant',
    status,
    content: text === null ? [] : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

type ClientCall = NonNullable<DoneEvent['toolCalls']>[number];

/** The output item of a call of the client's tool: `call_id` is what its `function_call_output` names. */
export function functionCallItem(meta: ResponseMeta, call: ClientCall, status: ResponseFunctionCall['status']): ResponseFunctionCall {
  return { type: 'function_call', id: `fc_${meta.id.replace(/^resp_/, '')}_${call.id}`, call_id: call.id, name: call.name, arguments: status === 'completed' ? call.arguments : '', status };
}

/**
 * A completed response's output: the message (left out when the model only called the
 * client's tools, as OpenAI does), then the calls of the client's tools.
 */
function completedOutput(meta: ResponseMeta, text: string, calls: ClientCall[] | undefined): ResponseObject['output'] {
  const message = calls?.length && text === '' ? [] : [outputMessage(meta, text, 'completed')];
  return [...message, ...(calls ?? []).map((c) => functionCallItem(meta, c, 'completed'))];
}

/** The `Response` in one of its states; `text` null means no output message yet. */
export function responseObject(
  meta: ResponseMeta,
  state:
    | { status: 'queued' | 'in_progress' }
    | { status: 'completed'; text: string; usage: DoneEvent['usage'] | null | undefined; calls?: ClientCall[]; completedAt?: number }
    | { status: 'failed'; text: string | null; message: string }
    | { status: 'cancelled'; text: string | null },
): ResponseObject {
  const now = Math.floor(Date.now() / 1000);
  return {
    id: meta.id,
    object: 'response',
    created_at: meta.createdAt,
    completed_at: state.status === 'completed' ? (state.completedAt ?? now) : null,
    status: state.status,
    background: meta.background,
    error: state.status === 'failed' ? { code: 'server_error', message: state.message } : null,
    incomplete_details: null,
    instructions: meta.instructions,
    max_output_tokens: meta.maxOutputTokens,
    model: meta.model,
    output:
      state.status === 'completed'
        ? completedOutput(meta, state.text, state.calls)
        : (state.status === 'failed' || state.status === 'cancelled') && state.text !== null
          ? [outputMessage(meta, state.text, 'incomplete')]
          : [],
    parallel_tool_calls: meta.parallelToolCalls,
    previous_response_id: meta.previousResponseId,
    reasoning: null,
    store: meta.store,
    temperature: meta.temperature,
    top_p: meta.topP,
    text: { format: meta.textFormat },
    tool_choice: meta.toolChoice,
    tools: meta.tools,
    truncation: 'disabled',
    metadata: meta.metadata,
    ...(state.status === 'completed' ? { usage: responseUsage(state.usage) } : {}),
  };
}

/**
 * The events of one streamed response, in the order OpenAI sends them for a single text message:
 * created, in_progress, output_item.added, content_part.added, output_text.delta..., then
 * output_text.done, content_part.done, output_item.done and completed; or failed at any point.
 * Each call stamps the next `sequence_number` (from 0, contiguous).
 */
export class ResponseEvents {
  #seq = 0;

  constructor(readonly meta: ResponseMeta) {}

  /** A background response is created `queued`, as OpenAI's are; the next event says it runs. */
  created() {
    return this.#event('response.created', { response: responseObject(this.meta, { status: this.meta.background ? 'queued' : 'in_progress' }) });
  }

  inProgress() {
    return this.#event('response.in_progress', { response: responseObject(this.meta, { status: 'in_progress' }) });
  }

  itemAdded() {
    return this.#event('response.output_item.added', { output_index: 0, item: outputMessage(this.meta, null, 'in_progress') });
  }

  partAdded() {
    return this.#event('response.content_part.added', { ...this.#at(), part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
  }

  textDelta(delta: string) {
    return this.#event('response.output_text.delta', { ...this.#at(), delta, logprobs: [] });
  }

  textDone(text: string) {
    return this.#event('response.output_text.done', { ...this.#at(), text, logprobs: [] });
  }

  partDone(text: string) {
    return this.#event('response.content_part.done', { ...this.#at(), part: { type: 'output_text', text, annotations: [], logprobs: [] } });
  }

  itemDone(text: string) {
    return this.#event('response.output_item.done', { output_index: 0, item: outputMessage(this.meta, text, 'completed') });
  }

  completed(text: string, usage: DoneEvent['usage'] | null | undefined, calls?: ClientCall[], completedAt?: number) {
    return this.#event('response.completed', { response: responseObject(this.meta, { status: 'completed', text, usage, ...(calls ? { calls } : {}), ...(completedAt ? { completedAt } : {}) }) });
  }

  /** The events of one call of the client's tools at `outputIndex`: added, its arguments (whole), done. */
  functionCall(call: ClientCall, outputIndex: number) {
    const item = functionCallItem(this.meta, call, 'completed');
    const at = { item_id: item.id, output_index: outputIndex };
    return [
      this.#event('response.output_item.added', { output_index: outputIndex, item: functionCallItem(this.meta, call, 'in_progress') }),
      this.#event('response.function_call_arguments.delta', { ...at, delta: call.arguments }),
      this.#event('response.function_call_arguments.done', { ...at, name: call.name, arguments: call.arguments }),
      this.#event('response.output_item.done', { output_index: outputIndex, item }),
    ];
  }

  /** A failure once the stream is open; `text` is what was sent so far (null: no message began). */
  failed(text: string | null, message: string) {
    return this.#event('response.failed', { response: responseObject(this.meta, { status: 'failed', text, message }) });
  }

  #at() {
    return { item_id: this.meta.itemId, output_index: 0, content_index: 0 };
  }

  #event<T extends string, B extends object>(type: T, body: B) {
    return { type, sequence_number: this.#seq++, ...body };
  }
}
