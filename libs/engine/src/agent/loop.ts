import type { Logger } from 'pino';
import type { ClientTool, ToolType } from '@agentry/contracts';
import type { ChatMessage, ModelCallRequest, ModelEvent, ModelUsage, ToolCall } from '../models/types.js';
import { ToolError } from '../tools/types.js';
import { DEFAULT_TOOL_TIMEOUT_MS } from '@agentry/definitions';
import { markSpanFailed, withChildSpan } from '../tracing.js';

/** A tool as the loop sees it: a definition for the model plus how to run it. */
export interface LoopTool {
  name: string;
  description: string;
  parameters: object;
  toolType: ToolType;
  /** Per-call timeout (default the loop's). */
  timeoutMs?: number;
  run(args: Record<string, unknown>, signal: AbortSignal): Promise<string>;
}

/** What the loop reports as it goes; the worker turns these into run events. */
export type LoopEvent =
  | { type: 'text'; text: string }
  | { type: 'tool_start'; toolCallId: string; toolName: string; toolType: ToolType; arguments: string }
  | { type: 'tool_result'; toolCallId: string; toolName: string; toolType: ToolType; content: string; isError?: boolean }
  /** A model call is being retried (see ModelEvent `retry`): progress for the person waiting, not part of the answer. */
  | { type: 'retry'; attempt: number; of: number; reason: string };

export interface AgentLoopOptions {
  provider?: string;
  model?: string;
  failover?: Array<{ provider: string; model?: string }>;
  params?: ModelCallRequest['params'];
  /** Model calls at most (default 50). */
  maxStep?: number;
  /** Longer tool outputs are cut, with a marker (default 50,000 characters). */
  maxToolOutputLength?: number;
  /** Default per-tool timeout (120 s). */
  toolTimeoutMs?: number;
  /**
   * The client's own function tools, offered beside the agent's: a model reply that calls one
   * ends the loop (after the reply's server-side calls ran) with the calls, for the client.
   */
  clientTools?: ClientTool[];
  /** OpenAI `tool_choice` of the first model call (later ones leave it to the model). */
  toolChoice?: unknown;
  parallelToolCalls?: boolean;
}

interface AgentLoopDeps {
  stream(req: ModelCallRequest): AsyncIterable<ModelEvent>;
  emit(event: LoopEvent): Promise<void>;
  logger: Logger;
}

export interface AgentLoopResult {
  /** The final answer (text of the last model call, plus any stop explanation). */
  output: string;
  /** What this turn added after the input: assistant tool calls, tool results, the final answer. */
  added: ChatMessage[];
  usage: ModelUsage | null;
  finishReason: string;
  steps: number;
  /** With finishReason `tool_calls`: the calls of the client's tools that ended the loop. */
  clientCalls?: ToolCall[];
}

const DOOM_REPEATS = 3;

function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[output truncated: ${text.length - max} more characters]`;
}

function addUsage(a: ModelUsage | null, b: ModelUsage | undefined): ModelUsage | null {
  if (!b) return a;
  if (!a) return { ...b };
  return { promptTokens: a.promptTokens + b.promptTokens, completionTokens: a.completionTokens + b.completionTokens, totalTokens: a.totalTokens + b.totalTokens };
}

/** Runs one tool call in its span (a traced run's); a failed call marks the span failed. */
function runTool(tool: LoopTool | undefined, call: ToolCall, signal: AbortSignal, timeoutMs: number): Promise<{ content: string; isError: boolean }> {
  return withChildSpan(`tool ${call.name}`, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': call.name, 'gen_ai.tool.call.id': call.id }, async (span) => {
    const result = await runToolCall(tool, call, signal, timeoutMs);
    if (span && result.isError) markSpanFailed(span, new Error(result.content));
    return result;
  });
}

/** Runs one tool call with its timeout; failures become results marked as errors. */
async function runToolCall(tool: LoopTool | undefined, call: ToolCall, signal: AbortSignal, timeoutMs: number): Promise<{ content: string; isError: boolean }> {
  if (!tool) return { content: `Error: there is no tool named "${call.name}"`, isError: true };
  let args: Record<string, unknown>;
  try {
    const parsed: unknown = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    args = parsed as Record<string, unknown>;
  } catch {
    return { content: `Error: the arguments of ${call.name} are not a JSON object: ${call.arguments.slice(0, 200)}`, isError: true };
  }
  const ctl = new AbortController();
  const callSignal = ctl.signal;
  // Passed on in a microtask, not at once: nested runs (a tool running an agent whose tool runs
  // another...) aborted one another synchronously, a set of stack frames per level, and a cancel
  // of a deep run overflowed the stack. (AbortSignal.any would flatten each level's sources into
  // the next, quadratic in the depth.)
  const onAbort = () => queueMicrotask(() => ctl.abort(signal.reason));
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => ctl.abort(new ToolError(`${call.name} timed out after ${timeoutMs} ms`)), timeoutMs);
  try {
    const result = await Promise.race([
      tool.run(args, callSignal),
      new Promise<never>((_, reject) => callSignal.addEventListener('abort', () => reject(callSignal.reason), { once: true })),
    ]);
    return { content: result, isError: false };
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    return { content: `Error: ${(err as Error)?.message ?? String(err)}`, isError: true };
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The agent: call the model with the tool definitions, run the calls it asks for (parallel
 * calls concurrently, results in call order), feed the results back, and repeat until it
 * answers without calls or `maxStep` model calls were made. Identical calls three times in a
 * row stop the loop with an explanation (doom-loop guard). Tool failures go back to the model
 * as results marked as errors; only a cancel (the signal) ends the loop with an exception.
 */
export async function runAgentLoop(
  deps: AgentLoopDeps,
  opts: AgentLoopOptions,
  input: ChatMessage[],
  tools: LoopTool[],
  signal: AbortSignal,
): Promise<AgentLoopResult> {
  const maxStep = opts.maxStep ?? 50;
  const toolbox = new Toolbox(tools, opts);
  const messages = [...input];
  const added: ChatMessage[] = [];
  let usage: ModelUsage | null = null;
  const guard = new RepeatGuard();

  for (let step = 1; step <= maxStep; step++) {
    // The client's tool_choice is for its turn's first answer: forced on every step, `required` would never let the agent finish.
    const { toolChoice, ...callOpts } = opts;
    const choice = step === 1 && toolChoice !== undefined ? { toolChoice } : {};
    const reply = await callModel(deps, { ...callOpts, ...choice, messages, tools: toolbox.definitions }, signal);
    usage = addUsage(usage, reply.usage);
    if (reply.calls.length === 0) {
      added.push({ role: 'assistant', content: reply.text });
      return { output: reply.text, added, usage, finishReason: reply.finishReason === 'tool_calls' ? 'stop' : reply.finishReason, steps: step };
    }
    const assistant = assistantCalling(reply.text, reply.calls);
    messages.push(assistant);
    added.push(assistant);
    const forClient = reply.calls.filter((c) => toolbox.isClients(c.name));
    const server = reply.calls.filter((c) => !toolbox.isClients(c.name));
    if (forClient.length === 0 && guard.repeated(reply.calls)) {
      const note = await stopRepeating(deps, reply.calls, added);
      return { output: reply.text + note, added, usage, finishReason: 'stop', steps: step };
    }
    if (server.length > 0) {
      for (const result of await toolbox.run(deps, server, signal)) {
        messages.push(result);
        added.push(result);
      }
    }
    // The client runs its own tools: the turn ends with their calls, its answers come as the next turn.
    if (forClient.length > 0) return { output: reply.text, added, usage, finishReason: 'tool_calls', steps: step, clientCalls: forClient };
  }

  const note = `[Stopped after ${maxStep} model calls (maxStep) without a final answer.]`;
  await deps.emit({ type: 'text', text: note });
  added.push({ role: 'assistant', content: note });
  return { output: note, added, usage, finishReason: 'length', steps: maxStep };
}

/** One model call, its text streamed out as it comes; what it asked for once it ended. */
async function callModel(
  deps: AgentLoopDeps,
  req: Pick<AgentLoopOptions, 'provider' | 'model' | 'failover' | 'params' | 'toolChoice' | 'parallelToolCalls'> & { messages: ChatMessage[]; tools: object[] },
  signal: AbortSignal,
): Promise<{ text: string; calls: ToolCall[]; finishReason: string; usage: ModelUsage | undefined }> {
  let text = '';
  let calls: ToolCall[] = [];
  let finishReason = 'stop';
  let usage: ModelUsage | undefined;
  for await (const ev of deps.stream({
    provider: req.provider,
    model: req.model,
    failover: req.failover,
    messages: req.messages,
    params: req.params,
    ...(req.tools.length > 0 ? { tools: req.tools } : {}),
    ...(req.toolChoice !== undefined ? { tool_choice: req.toolChoice } : {}),
    ...(req.parallelToolCalls !== undefined ? { parallel_tool_calls: req.parallelToolCalls } : {}),
    signal,
  })) {
    if (ev.type === 'text') {
      if (ev.text === '') continue;
      text += ev.text;
      await deps.emit({ type: 'text', text: ev.text });
    } else if (ev.type === 'tool_calls') {
      calls = ev.calls;
    } else if (ev.type === 'retry') {
      await deps.emit({ type: 'retry', attempt: ev.attempt, of: ev.of, reason: ev.reason });
    } else {
      finishReason = ev.finishReason;
      usage = addUsage(usage ?? null, ev.usage) ?? undefined;
    }
  }
  if (signal.aborted) throw signal.reason ?? new Error('cancelled');
  return { text, calls, finishReason, usage };
}

function assistantCalling(text: string, calls: ToolCall[]): ChatMessage {
  return { role: 'assistant', content: text, tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) };
}

/** The doom-loop guard: the same calls (names and arguments) DOOM_REPEATS times in a row. */
class RepeatGuard {
  #last = '';
  #repeats = 0;

  repeated(calls: ToolCall[]): boolean {
    const signature = JSON.stringify(calls.map((c) => [c.name, c.arguments]));
    this.#repeats = signature === this.#last ? this.#repeats + 1 : 1;
    this.#last = signature;
    return this.#repeats >= DOOM_REPEATS;
  }
}

/** Ends a loop the guard stopped: the calls answered as not run, and a note for the client and the transcript. */
async function stopRepeating(deps: AgentLoopDeps, calls: ToolCall[], added: ChatMessage[]): Promise<string> {
  const note = `\n\n[Stopped: the same tool call (${calls.map((c) => c.name).join(', ')}) was requested ${DOOM_REPEATS} times in a row without progress.]`;
  // Tool calls need answers in the transcript, or the next turn's model call is invalid.
  for (const c of calls) added.push({ role: 'tool', tool_call_id: c.id, content: 'Not run: repeated identical call (loop guard).' });
  added.push({ role: 'assistant', content: note.trim() });
  await deps.emit({ type: 'text', text: note });
  deps.logger.warn({ tools: calls.map((c) => c.name) }, 'agent loop stopped by the doom-loop guard');
  return note;
}

/** The agent's tools by name, with what the model is told of them and how one round of calls runs. */
class Toolbox {
  readonly definitions: object[];
  readonly #byName: Map<string, LoopTool>;
  readonly #clients: Set<string>;

  constructor(
    tools: LoopTool[],
    private readonly opts: Pick<AgentLoopOptions, 'maxToolOutputLength' | 'toolTimeoutMs' | 'clientTools'>,
  ) {
    this.#byName = new Map(tools.map((t) => [t.name, t]));
    const clients = opts.clientTools ?? [];
    this.#clients = new Set(clients.map((t) => t.name));
    this.definitions = [
      ...tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })),
      // The client's definitions go to the model as the client wrote them.
      ...clients.map((t) => ({ type: 'function', function: t })),
    ];
  }

  /** Whether `name` is one of the client's tools (the gateway refused names clashing with the agent's). */
  isClients(name: string): boolean {
    return this.#clients.has(name) && !this.#byName.has(name);
  }

  /** Runs the calls concurrently and answers them in call order (results cut to the output limit). */
  async run(deps: AgentLoopDeps, calls: ToolCall[], signal: AbortSignal): Promise<ChatMessage[]> {
    const maxOut = this.opts.maxToolOutputLength ?? 50_000;
    const toolType = (c: ToolCall) => this.#byName.get(c.name)?.toolType ?? 'builtin';
    for (const c of calls) {
      await deps.emit({ type: 'tool_start', toolCallId: c.id, toolName: c.name, toolType: toolType(c), arguments: c.arguments });
    }
    const results = await Promise.all(
      calls.map((c) => runTool(this.#byName.get(c.name), c, signal, this.#byName.get(c.name)?.timeoutMs ?? this.opts.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS)),
    );
    const answers: ChatMessage[] = [];
    for (const [i, c] of calls.entries()) {
      const r = results[i]!;
      const content = truncate(r.content, maxOut);
      await deps.emit({ type: 'tool_result', toolCallId: c.id, toolName: c.name, toolType: toolType(c), content, ...(r.isError ? { isError: true } : {}) });
      answers.push({ role: 'tool', tool_call_id: c.id, content });
    }
    return answers;
  }
}
