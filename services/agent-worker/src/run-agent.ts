import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import { RunRequest, type RunEvent } from '@agentry/contracts';
import { AppError, isAppError } from '@agentry/errors';
import {
  appendMessages,
  finishRun,
  getRuleChain,
  loadHistory,
  markRunStreamed,
  type Db,
  type JsonValue,
  type RunRecord,
  type SessionMessage,
} from '@agentry/db';
import {
  createRuleMsg,
  parseChain,
  resolveTools,
  runAgentLoop,
  type ChainContext,
  type ChainRunner,
  type ScriptSandbox,
  type AgentToolConfig,
  type ChatMessage,
  type LoopEvent,
  type ModelCallRequest,
  type ModelEvent,
  type ToolDefinition,
} from '@agentry/engine';

/** What running one agent needs; the service wires it, tests may pass their own. */
export interface RunDeps {
  db: Db;
  logger: Logger;
  /** Streams a model call (the provider client). */
  stream(req: ModelCallRequest): AsyncIterable<ModelEvent>;
  /** Publishes one event of the run, in order. */
  publish(event: RunEvent): Promise<void>;
  /** History window of a session. */
  maxMessages: number;
  /** Built-in tools by name. */
  builtin: Record<string, ToolDefinition>;
  /** The agent's instructions from its `systemPrompt` (templates rendered, skills block added). */
  systemPrompt?(config: AgentNodeConfig, agentId: string): Promise<string>;
  /** Runs rule chains (rule-chain tools); without it such tools are left out. */
  chains?: { runner: ChainRunner; sandbox: ScriptSandbox };
}

/** Sub-agents nest at most this deep. */
const MAX_AGENT_DEPTH = 3;

export interface AgentNodeConfig {
  provider?: string;
  model?: string;
  systemPrompt?: string;
  params?: Record<string, unknown>;
  failover?: Array<{ provider?: string; model?: string }>;
  maxStep?: number;
  maxToolOutputLength?: number;
  tools?: AgentToolConfig[];
  disabledSkills?: string[];
}

/** Distributes `Omit` over a union (plain `Omit` collapses it). */
type EventBody = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'runId' | 'seq'> : never) : never;

/** The `ai/agent` node of an agent's DSL (the first one), or undefined. */
export function agentNode(dsl: JsonValue): AgentNodeConfig | undefined {
  const nodes = (dsl as { metadata?: { nodes?: Array<{ type?: string; configuration?: unknown }> } } | null)?.metadata?.nodes ?? [];
  const node = nodes.find((n) => n.type === 'ai/agent');
  return node ? ((node.configuration ?? {}) as AgentNodeConfig) : undefined;
}

/**
 * The conversation sent to the model. System prompt: the agent's, then any `system` messages of
 * the request. Without a session, the request's messages are the whole context (as in the
 * OpenAI API). With one, the stored history is the context and only the request's trailing user
 * messages (after its last assistant message) are new.
 */
export function buildConversation(
  config: AgentNodeConfig,
  request: RunRequest,
  history: SessionMessage[] | null,
  systemPrompt: string = config.systemPrompt ?? '',
): { messages: ChatMessage[]; newTurns: SessionMessage[] } {
  const system = [systemPrompt, ...request.messages.filter((m) => m.role === 'system').map((m) => m.content)]
    .filter((s) => s.trim() !== '')
    .join('\n\n');
  const rest = request.messages.filter((m) => m.role !== 'system');
  let body: ChatMessage[];
  let newTurns: SessionMessage[];
  if (history === null) {
    body = rest.map((m) => ({ role: m.role, content: m.content }));
    newTurns = [];
  } else {
    const lastAssistant = rest.map((m) => m.role).lastIndexOf('assistant');
    const trailing = rest.slice(lastAssistant + 1).filter((m) => m.role === 'user');
    newTurns = trailing.map((m) => ({ role: 'user', content: m.content }));
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
    body = [...past, ...trailing.map((m) => ({ role: 'user' as const, content: m.content }))];
  }
  const messages: ChatMessage[] = [...(system ? [{ role: 'system' as const, content: system }] : []), ...body];
  return { messages, newTurns };
}

function modelParams(config: AgentNodeConfig, request: RunRequest): ModelCallRequest['params'] {
  const p = config.params ?? {};
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const fromAgent = {
    temperature: num(p.temperature),
    top_p: num(p.topP ?? p.top_p),
    max_tokens: num(p.maxTokens ?? p.max_tokens),
    stop: typeof p.stop === 'string' || Array.isArray(p.stop) ? (p.stop as string | string[]) : undefined,
  };
  const merged = { ...fromAgent, ...Object.fromEntries(Object.entries(request.params ?? {}).filter(([, v]) => v !== undefined)) };
  return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined)) as ModelCallRequest['params'];
}

/**
 * Runs one claimed run to its end: publishes its events in order (seq from 0), and commits the
 * outcome. A completed turn is appended to the session in the same transaction that marks the
 * run succeeded, and `done` is published only after that commit, so the next turn of the
 * session sees it. A failed or cancelled run leaves the session untouched.
 */
export async function runAgent(deps: RunDeps, run: RunRecord, signal: AbortSignal): Promise<void> {
  let seq = 0;
  const emit = (event: EventBody) => deps.publish({ ...event, runId: run.id, seq: seq++ } as RunEvent);
  const log = deps.logger.child({ runId: run.id, agentId: run.agentId });
  let output = '';
  try {
    if (!Value.Check(RunRequest, run.request)) throw new AppError('VALIDATION', 400, 'the stored run request is malformed');
    const request = run.request as RunRequest;
    const agent = await getRuleChain(deps.db, run.agentId);
    if (!agent || agent.kind !== 'agent') throw new AppError('NOT_FOUND', 404, `Not found: agent "${run.agentId}"`);
    const config = agentNode(agent.dsl);
    if (!config) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" has no ai/agent node`);
    const history = run.sessionId ? await loadHistory(deps.db, run.sessionId, deps.maxMessages) : null;
    const systemPrompt = deps.systemPrompt ? await deps.systemPrompt(config, run.agentId) : (config.systemPrompt ?? '');
    const { messages, newTurns } = buildConversation(config, request, history, systemPrompt);

    const onEvent = async (ev: LoopEvent) => {
      if (ev.type === 'text') {
        if (output === '') await markRunStreamed(deps.db, run.id);
        output += ev.text;
      } else if (output === '') {
        // A tool call is visible progress too: a retry would run the tools twice.
        await markRunStreamed(deps.db, run.id);
      }
      await emit(ev);
    };
    const nodes = (agent.dsl as { metadata?: { nodes?: unknown[] } }).metadata?.nodes ?? [];
    const result =
      nodes.length > 1 && deps.chains
        ? await runAgentChain(deps, run, agent.dsl, messages, request, signal, onEvent)
        : await runAgentWithTools(deps, run, config, messages, request, signal, onEvent, [run.agentId]);
    const usage: JsonValue | null = result.usage;
    const finishReason = result.finishReason;
    output = result.output;
    const turn: SessionMessage[] = result.added.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.tool_calls ? { toolCalls: m.tool_calls as JsonValue } : {}),
      ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}),
    }));

    const committed = await deps.db.transaction().execute(async (tx) => {
      const ok = await finishRun(tx, run.id, { status: 'succeeded', output, usage });
      if (ok && run.sessionId) await appendMessages(tx, run.sessionId, run.id, [...newTurns, ...turn]);
      return ok;
    });
    if (!committed) {
      log.info('run ended elsewhere (cancelled) before it could complete');
      return;
    }
    await emit({
      type: 'done',
      finishReason,
      ...(usage ? { usage: usage as { promptTokens: number; completionTokens: number; totalTokens: number } } : {}),
    });
    log.info({ chars: output.length }, 'run succeeded');
  } catch (err) {
    if (signal.aborted) {
      await finishRun(deps.db, run.id, { status: 'cancelled', output: output || null, error: 'cancelled' });
      log.info({ reason: String((signal.reason as Error | undefined)?.message ?? signal.reason) }, 'run cancelled');
      return;
    }
    const message = isAppError(err) ? err.message : 'the agent failed unexpectedly';
    const status = isAppError(err) ? err.status : 500;
    if (status >= 500) log.error({ err }, 'run failed');
    else log.info({ err: message }, 'run failed');
    await finishRun(deps.db, run.id, { status: 'failed', output: output || null, error: message });
    await emit({ type: 'error', message, status });
  }
}

/**
 * One agent's tool loop: resolves its tools (built-ins, rule chains, sub-agents, MCP) and runs
 * the loop. Sub-agents run silently (their answer is the tool result), nest at most
 * MAX_AGENT_DEPTH deep, and an agent already on the stack cannot be called again (cycle).
 */
async function runAgentWithTools(
  deps: RunDeps,
  run: RunRecord,
  config: AgentNodeConfig,
  messages: ChatMessage[],
  request: RunRequest | null,
  signal: AbortSignal,
  emit: (ev: LoopEvent) => Promise<void>,
  stack: string[],
) {
  // The skill tool must not load what the agent disabled: hand it the list through its config.
  const toolConfigs = (config.tools ?? []).map((t) =>
    (t.type ?? 'builtin') === 'builtin' && t.name === 'skill' && config.disabledSkills?.length
      ? { ...t, config: { ...t.config, disabledSkills: config.disabledSkills } }
      : t,
  );
  const resolved = await resolveTools(toolConfigs, {
    logger: deps.logger,
    builtin: deps.builtin,
    context: { db: deps.db, agentId: stack.at(-1)!, runId: run.id, sessionId: run.sessionId, logger: deps.logger },
    runSubagent: async (agentId, message, subSignal) => {
      if (stack.includes(agentId)) throw new AppError('VALIDATION', 400, `agent ${agentId} is already running in this chain (${[...stack, agentId].join(' -> ')})`);
      if (stack.length >= MAX_AGENT_DEPTH) throw new AppError('VALIDATION', 400, `sub-agents nest at most ${MAX_AGENT_DEPTH} deep`);
      const sub = await getRuleChain(deps.db, agentId);
      const subConfig = sub?.kind === 'agent' ? agentNode(sub.dsl) : undefined;
      if (!subConfig) throw new AppError('NOT_FOUND', 404, `agent "${agentId}" does not exist`);
      const subPrompt = deps.systemPrompt ? await deps.systemPrompt(subConfig, agentId) : (subConfig.systemPrompt ?? '');
      const subMessages: ChatMessage[] = [...(subPrompt ? [{ role: 'system' as const, content: subPrompt }] : []), { role: 'user', content: message }];
      const result = await runAgentWithTools(deps, run, subConfig, subMessages, null, subSignal, async () => {}, [...stack, agentId]);
      return result.output;
    },
    ...(deps.chains ? { runChain: (chainId: string, args: Record<string, unknown>, chainSignal: AbortSignal) => runChainTool(deps, run, chainId, args, chainSignal, stack) } : {}),
  });
  try {
    const failover = (config.failover ?? []).filter((f): f is { provider: string; model?: string } => typeof f.provider === 'string');
    return await runAgentLoop(
      { stream: deps.stream, emit, logger: deps.logger },
      {
        provider: config.provider,
        model: config.model,
        failover,
        params: request ? modelParams(config, request) : modelParams(config, { messages: [] }),
        ...(config.maxStep ? { maxStep: config.maxStep } : {}),
        ...(config.maxToolOutputLength ? { maxToolOutputLength: config.maxToolOutputLength } : {}),
      },
      messages,
      resolved.tools,
      signal,
    );
  } finally {
    await resolved.close();
  }
}

/** Loads a stored chain for the runner (undefined when it does not exist). */
async function loadChain(deps: RunDeps, id: string) {
  const row = await getRuleChain(deps.db, id);
  return row ? parseChain({ id: row.id, dsl: row.dsl, isAgent: row.kind === 'agent' }) : undefined;
}

/**
 * The context a chain runs in: sub-chains through the same runner, `ai/llm` through the agent's
 * providers, `ai/agent` through the caller's `runAgent`.
 */
function chainContext(deps: RunDeps, signal: AbortSignal, runAgent: ChainContext['runAgent']): ChainContext {
  const { runner, sandbox } = deps.chains!;
  const ctx: ChainContext = {
    logger: deps.logger,
    signal,
    sandbox,
    runChain: (id, msg, depth, path) => runner.runById((cid) => loadChain(deps, cid), id, msg, ctx, { depth, path }).then((r) => r.msg),
    complete: async (req) => {
      let text = '';
      for await (const ev of deps.stream({
        provider: req.provider,
        model: req.model,
        messages: req.messages,
        params: req.params as ModelCallRequest['params'],
        signal: req.signal,
      })) {
        if (ev.type === 'text') text += ev.text;
      }
      return text;
    },
    runAgent,
  };
  return ctx;
}

/**
 * A rule-chain tool: the arguments become `msg.data` (JSON), the chain runs, and the final
 * `msg.data` is the tool's result. `ai/llm` nodes call the agent's providers, `ai/agent` nodes
 * run a silent nested agent loop on behalf of the calling agent, `flow` nodes run sub-chains.
 */
async function runChainTool(
  deps: RunDeps,
  run: RunRecord,
  chainId: string,
  args: Record<string, unknown>,
  signal: AbortSignal,
  stack: string[],
): Promise<string> {
  const ctx = chainContext(deps, signal, async (config, msg) => {
    const agentConfig = config as AgentNodeConfig;
    const messages: ChatMessage[] = [
      ...(agentConfig.systemPrompt ? [{ role: 'system' as const, content: agentConfig.systemPrompt }] : []),
      { role: 'user', content: msg.data },
    ];
    const result = await runAgentWithTools(deps, run, agentConfig, messages, null, signal, async () => {}, stack);
    return result.output;
  });
  const result = await deps.chains!.runner.runById((id) => loadChain(deps, id), chainId, createRuleMsg({ data: args }), ctx);
  return result.msg.data;
}

/**
 * An agent whose chain has more than its `ai/agent` node: the chain runs with the user's last
 * message as `msg.data`. Nodes before the agent may filter or rewrite it; the `ai/agent` node runs
 * the streaming tool loop on the conversation with the (possibly rewritten) message in place of
 * the last user turn. When no agent node ran (a filter ended the chain), the chain's final
 * `msg.data` is the answer, sent as one text event.
 */
async function runAgentChain(
  deps: RunDeps,
  run: RunRecord,
  dsl: JsonValue,
  messages: ChatMessage[],
  request: RunRequest,
  signal: AbortSignal,
  emit: (ev: LoopEvent) => Promise<void>,
) {
  const parsed = parseChain({ id: run.agentId, dsl, isAgent: true });
  if (!parsed.ok) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" does not load: ${parsed.error}`);
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  let agentResult: Awaited<ReturnType<typeof runAgentWithTools>> | null = null;
  const ctx = chainContext(deps, signal, async (config, msg) => {
    const turn = messages.map((m, i) => (i === lastUser ? { ...m, content: msg.data } : m));
    const result = await runAgentWithTools(deps, run, config as AgentNodeConfig, turn, request, signal, emit, [run.agentId]);
    agentResult = agentResult ? { ...result, added: [...agentResult.added, ...result.added] } : result;
    return result.output;
  });
  const input = createRuleMsg({ data: lastUser >= 0 ? messages[lastUser]!.content : '', metadata: { agentId: run.agentId, runId: run.id } });
  const chain = await deps.chains!.runner.run(parsed.chain, input, ctx);
  const ran = agentResult as Awaited<ReturnType<typeof runAgentWithTools>> | null;
  if (ran) return { ...ran, output: chain.msg.data };
  await emit({ type: 'text', text: chain.msg.data });
  return { output: chain.msg.data, added: [{ role: 'assistant' as const, content: chain.msg.data }], usage: null, finishReason: 'stop', steps: 0 };
}
