import type { Logger } from 'pino';
import { Value } from 'typebox/value';
import { RunRequest, type InvalidateMessage, type RunEvent } from '@agentry/contracts';
import { AppError, isAppError } from '@agentry/errors';
import type { OutboxQueue } from '@agentry/channels';
import { serviceMetrics, type Registry } from '@agentry/runtime';
import {
  appendMessages,
  finishRun,
  getRuleChain,
  isDatabaseUnavailable,
  loadHistory,
  markRunStreamed,
  type Db,
  type FinalRunStatus,
  type JsonValue,
  type RuleChainRow,
  type RunRecord,
  type SessionMessage,
} from '@agentry/db';
import {
  ChainError,
  ScriptError,
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
  type SecretSealer,
  type ToolContext,
  type ToolDefinition,
  unsealDefinition,
} from '@agentry/engine';
import { enqueueReply, failureNotice, queueReply } from './reply.js';
import { RunEventPublisher, type EventBody } from '@agentry/engine';
import { retryWhileDbDown } from './db-retry.js';

/** What running one agent needs; the service wires it, tests may pass their own. */
export interface RunDeps {
  db: Db;
  logger: Logger;
  /** Streams a model call (the provider client). */
  stream(req: ModelCallRequest): AsyncIterable<ModelEvent>;
  /** Publishes one event of the run, in order. */
  publish(event: RunEvent): Promise<void>;
  /** An agent's row (default: read from the database each time; the service passes its cache). */
  agent?(agentId: string): Promise<RuleChainRow | undefined>;
  /** Opens the secrets sealed inside definitions (the gateway seals them with the same key). */
  secrets: SecretSealer;
  /** History window of a session. */
  maxMessages: number;
  /** `workspace.max_file_bytes`: the workspace tools write no larger file (as the workspace routes). */
  maxFileBytes?: number;
  /** `security.allowUnsandboxedBash`, read at each run (it may change live). */
  allowUnsandboxedBash?: () => boolean;
  /** Built-in tools by name. */
  builtin: Record<string, ToolDefinition>;
  /** The agent's instructions from its `systemPrompt` (templates rendered, skills block added). */
  systemPrompt?(config: AgentNodeConfig, agentId: string): Promise<string>;
  /** Runs rule chains (rule-chain tools); without it such tools are left out. */
  chains?: { runner: ChainRunner; sandbox: ScriptSandbox };
  /** Publishes on `invalidate` (the bus's pub/sub): tools that change cached state announce it. */
  publishInvalidate?(message: InvalidateMessage): Promise<void>;
  /** Enqueues outbound messages (the answer of a run that came from a channel); without it such answers are not sent. */
  outboundQueue?: OutboxQueue;
  /** Sends through a channel and waits for the platform (the `send_message` tool). */
  sendMessage?: ToolContext['sendMessage'];
  /** Where run counts and latencies go (the process's registry). */
  metrics?: Registry;
  /** Called once the answer is committed and `done` published (nodes after the ai/agent node may still run). */
  delivered?(): void;
}

/**
 * A stored chain with its secrets opened, for this run only: rows, caches and job payloads keep
 * them sealed, so the plain text lives no longer than the run that sends it.
 */
function opened(deps: RunDeps, row: RuleChainRow): RuleChainRow {
  return { ...row, dsl: unsealDefinition(row.dsl, deps.secrets, `${row.kind === 'agent' ? 'agent' : 'rule chain'} "${row.id}"`) };
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

/** What an agent's tool loop answered (`runAgentLoop`'s result). */
type AgentResult = Awaited<ReturnType<typeof runAgentWithTools>>;
/** What a run delivers: its output and the assistant/tool messages added to the session. */
type Answer = Pick<AgentResult, 'output' | 'added' | 'usage' | 'finishReason'>;

/**
 * Runs one claimed run to its end: publishes its events in order (seq from 0), and commits the
 * outcome. A completed turn is appended to the session in the same transaction that marks the
 * run succeeded, and `done` is published only after that commit, so the next turn of the
 * session sees it. A failed or cancelled run leaves the session untouched.
 */
export async function runAgent(deps: RunDeps, run: RunRecord, signal: AbortSignal): Promise<void> {
  const events = new RunEventPublisher(run.id, deps.publish);
  const emit = (event: EventBody) => events.event(event);
  const readAgent = async (id: string) => {
    const row = await (deps.agent ?? ((agentId: string) => getRuleChain(deps.db, agentId)))(id);
    return row && opened(deps, row);
  };
  const log = deps.logger.child({ runId: run.id, agentId: run.agentId, ...(run.sessionId ? { sessionId: run.sessionId } : {}) });
  let output = '';
  const started = Date.now();
  let ttftMs: number | undefined;
  const timing = () => ({ durationMs: Date.now() - started, ...(ttftMs !== undefined ? { ttftMs } : {}) });
  const count = (status: FinalRunStatus) => {
    if (!deps.metrics) return;
    serviceMetrics.runs(deps.metrics).inc({ status, source: run.source });
    serviceMetrics.runDuration(deps.metrics).observe({ status }, (Date.now() - started) / 1000);
    if (ttftMs !== undefined) serviceMetrics.runTtft(deps.metrics).observe({ source: run.source }, ttftMs / 1000);
  };
  log.info({ source: run.source, attempt: run.attempts, queuedMs: started - run.createdAt.getTime() }, 'run started');
  try {
    if (!Value.Check(RunRequest, run.request)) throw new AppError('VALIDATION', 400, 'the stored run request is malformed');
    const request = run.request as RunRequest;
    const agent = await readAgent(run.agentId);
    if (!agent || agent.kind !== 'agent') throw new AppError('NOT_FOUND', 404, `Not found: agent "${run.agentId}"`);
    const config = agentNode(agent.dsl);
    if (!config) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" has no ai/agent node`);
    const [history, systemPrompt] = await Promise.all([
      run.sessionId ? loadHistory(deps.db, run.sessionId, deps.maxMessages) : null,
      deps.systemPrompt ? deps.systemPrompt(config, run.agentId) : (config.systemPrompt ?? ''),
    ]);
    const { messages, newTurns } = buildConversation(config, request, history, systemPrompt);

    /**
     * `streamed` is what keeps a takeover (after this worker died) from running the run again
     * once the client has seen output. The first text is published while the mark is being
     * written, and the loop goes on (next delta, any tool) only once the mark is committed. A
     * death between the two leaves at most that one event seen with `streamed` unset: the
     * takeover then runs again and its first event (seq 0) is a gap to the relay, which fails
     * the stream cleanly and cancels the run; no tool of this attempt can have run by then. A
     * tool event is still published only after the mark (a retry would run the tool twice).
     */
    let marked = false;
    const onEvent = async (ev: LoopEvent) => {
      if (ev.type === 'text') {
        ttftMs ??= Date.now() - started;
        output += ev.text;
        if (!marked) {
          marked = true;
          const mark = retryWhileDbDown(log, 'mark run streamed', () => markRunStreamed(deps.db, run.id));
          try {
            events.text(ev.text);
          } finally {
            await mark;
          }
        } else {
          events.text(ev.text);
        }
        return;
      }
      if (!marked) {
        marked = true;
        await retryWhileDbDown(log, 'mark run streamed', () => markRunStreamed(deps.db, run.id));
      }
      await emit(ev);
    };

    /**
     * Commits the answer (the run's output, the turn appended to the session) and then sends
     * `done`. False when the run had already ended elsewhere (the gateway cancelled it).
     */
    const deliver = async (answer: Answer): Promise<boolean> => {
      output = answer.output;
      const usage: JsonValue | null = answer.usage;
      const turn: SessionMessage[] = answer.added.map((m) => ({
        role: m.role,
        content: m.content,
        ...(m.tool_calls ? { toolCalls: m.tool_calls as JsonValue } : {}),
        ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}),
      }));
      let replyId: string | undefined;
      // All or nothing, retried while the database is away: a repeat after a lost commit finds
      // the run ended and writes nothing (the relay then reads the stored answer).
      const committed = await retryWhileDbDown(log, 'commit the answer', () =>
        deps.db.transaction().execute(async (tx) => {
          replyId = undefined;
          const ok = await finishRun(tx, run.id, { status: 'succeeded', output, usage });
          if (ok && run.sessionId) await appendMessages(tx, run.sessionId, run.id, [...newTurns, ...turn]);
          if (ok && request.reply && deps.outboundQueue) replyId = await queueReply(tx, run.id, request.reply, output);
          return ok;
        }),
      );
      if (deps.outboundQueue) await enqueueReply(deps.outboundQueue, replyId, log);
      if (!committed) {
        log.info('run ended elsewhere (cancelled) before it could complete');
        return false;
      }
      await emit({
        type: 'done',
        finishReason: answer.finishReason,
        ...(usage ? { usage: usage as { promptTokens: number; completionTokens: number; totalTokens: number } } : {}),
      });
      deps.delivered?.();
      const tokens = usage as { promptTokens?: number; completionTokens?: number; totalTokens?: number } | null;
      count('succeeded');
      log.info({ chars: output.length, ...timing(), ...(tokens ? { promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens } : {}) }, 'run succeeded');
      return true;
    };

    const nodes = (agent.dsl as { metadata?: { nodes?: unknown[] } }).metadata?.nodes ?? [];
    if (nodes.length > 1 && deps.chains) {
      await runAgentChain(deps, run, agent.dsl, messages, request, signal, onEvent, deliver, log);
    } else {
      await deliver(await runAgentWithTools(deps, run, config, messages, request, signal, onEvent, [run.agentId]));
    }
  } catch (err) {
    if (signal.aborted) {
      await retryWhileDbDown(log, 'cancel run', () => finishRun(deps.db, run.id, { status: 'cancelled', output: output || null, error: 'cancelled' }));
      count('cancelled');
      log.info({ reason: String((signal.reason as Error | undefined)?.message ?? signal.reason), ...timing() }, 'run cancelled');
      return;
    }
    // A rule chain wraps a node's failure (ChainError, cause = the provider's AppError): the
    // registered error inside decides the status, the wrapper's message says where it happened.
    const known = registeredCause(err);
    const dbDown = !known && isDatabaseUnavailable(err);
    const message = known ? (err as Error).message : dbDown ? 'the database was unavailable; please retry' : 'the agent failed unexpectedly';
    const status = known ? known.status : dbDown ? 503 : 500;
    count('failed');
    // A script's failure is its author's to read in the answer: no stack for the operator.
    if (status >= 500 && !(known instanceof ScriptError)) log.error({ err, ...timing() }, 'run failed');
    else log.info({ err: message, ...(known ? { code: known.code } : {}), ...timing() }, 'run failed');
    let noticeId: string | undefined;
    const reply = (run.request as Partial<RunRequest> | null)?.reply;
    await retryWhileDbDown(log, 'fail run', () =>
      deps.db.transaction().execute(async (tx) => {
        noticeId = undefined;
        const ok = await finishRun(tx, run.id, { status: 'failed', output: output || null, error: message });
        // A chat user would otherwise wait for an answer that never comes (cron deliveries stay silent).
        if (ok && reply && deps.outboundQueue && run.source !== 'cron') noticeId = await queueReply(tx, run.id, reply, failureNotice(message));
      }),
    );
    if (deps.outboundQueue) await enqueueReply(deps.outboundQueue, noticeId, log);
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
    context: {
      db: deps.db,
      agentId: stack.at(-1)!,
      runId: run.id,
      sessionId: run.sessionId,
      logger: deps.logger,
      ...(deps.maxFileBytes ? { maxFileBytes: deps.maxFileBytes } : {}),
      allowUnsandboxedBash: deps.allowUnsandboxedBash?.() ?? false,
      ...(deps.publishInvalidate ? { publishInvalidate: (message: InvalidateMessage) => deps.publishInvalidate!(message) } : {}),
      ...(deps.sendMessage ? { sendMessage: deps.sendMessage } : {}),
    },
    runSubagent: async (agentId, message, subSignal) => {
      if (stack.includes(agentId)) throw new AppError('VALIDATION', 400, `agent ${agentId} is already running in this chain (${[...stack, agentId].join(' -> ')})`);
      if (stack.length >= MAX_AGENT_DEPTH) throw new AppError('VALIDATION', 400, `sub-agents nest at most ${MAX_AGENT_DEPTH} deep`);
      const row = await (deps.agent ?? ((id: string) => getRuleChain(deps.db, id)))(agentId);
      const sub = row && opened(deps, row);
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
  if (!row) return undefined;
  const { dsl } = opened(deps, row);
  return parseChain({ id: row.id, dsl, isAgent: row.kind === 'agent' });
}

/**
 * The context a chain runs in: sub-chains through the same runner, `ai/llm` through the agent's
 * providers, `ai/agent` through the caller's `runAgent`.
 */
function chainContext(deps: RunDeps, run: RunRecord, signal: AbortSignal, runAgent: ChainContext['runAgent']): ChainContext {
  const { runner, sandbox } = deps.chains!;
  const ctx: ChainContext = {
    logger: deps.logger,
    signal,
    // Keyed by the run's agent: the pool is shared fairly between agents, not between runs.
    sandbox: { run: (code, input, opts) => sandbox.run(code, input, { ...opts, key: run.agentId }) },
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
  const ctx = chainContext(deps, run, signal, (config, msg) => runSilentAgent(deps, run, config as AgentNodeConfig, msg.data, signal, stack));
  const result = await deps.chains!.runner.runById((id) => loadChain(deps, id), chainId, createRuleMsg({ data: args }), ctx);
  return result.msg.data;
}

/** An `ai/agent` node that does not answer the client: its system prompt and `text` as the user turn, nothing streamed. */
async function runSilentAgent(deps: RunDeps, run: RunRecord, config: AgentNodeConfig, text: string, signal: AbortSignal, stack: string[]): Promise<string> {
  const messages: ChatMessage[] = [...(config.systemPrompt ? [{ role: 'system' as const, content: config.systemPrompt }] : []), { role: 'user', content: text }];
  const result = await runAgentWithTools(deps, run, config, messages, null, signal, async () => {}, stack);
  return result.output;
}

/**
 * An agent whose chain has more than its `ai/agent` node: the chain runs with the user's last
 * message as `msg.data`. Nodes before the agent may filter or rewrite it; the first `ai/agent`
 * node to run streams the tool loop on the conversation with the (possibly rewritten) message in
 * place of the last user turn, and its answer is delivered at once (committed as the run's
 * output and the session's assistant message, then `done`): what the client saw is what is
 * stored. Nodes after it run for their side effects with the answer in `msg.data`; what they do
 * to `msg.data` changes nothing delivered, a later `ai/agent` node runs silently, and a failure
 * among them is a warning on the run, which stays succeeded. When no agent node answered (a
 * filter ended the chain), the chain's final `msg.data` is the answer, sent as one text event.
 */
async function runAgentChain(
  deps: RunDeps,
  run: RunRecord,
  dsl: JsonValue,
  messages: ChatMessage[],
  request: RunRequest,
  signal: AbortSignal,
  emit: (ev: LoopEvent) => Promise<void>,
  deliver: (answer: Answer) => Promise<boolean>,
  log: Logger,
): Promise<void> {
  const parsed = parseChain({ id: run.agentId, dsl, isAgent: true });
  if (!parsed.ok) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" does not load: ${parsed.error}`);
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  // Stops the rest of the chain when the answer could not be delivered (the run ended
  // elsewhere, or the commit failed: that error then fails the run as usual).
  const stop = new AbortController();
  const chainSignal = AbortSignal.any([signal, stop.signal]);
  let answered = false;
  let deliveryError: { err: unknown } | undefined;
  const ctx = chainContext(deps, run, chainSignal, async (config, msg) => {
    if (answered) return runSilentAgent(deps, run, config as AgentNodeConfig, msg.data, chainSignal, [run.agentId]);
    const turn = messages.map((m, i) => (i === lastUser ? { ...m, content: msg.data } : m));
    const result = await runAgentWithTools(deps, run, config as AgentNodeConfig, turn, request, chainSignal, emit, [run.agentId]);
    answered = true;
    try {
      if (!(await deliver(result))) stop.abort(new Error('the run ended elsewhere'));
    } catch (err) {
      deliveryError = { err };
      stop.abort(err);
    }
    return result.output;
  });
  const input = createRuleMsg({ data: lastUser >= 0 ? messages[lastUser]!.content : '', metadata: { agentId: run.agentId, runId: run.id } });
  let final: string;
  try {
    final = (await deps.chains!.runner.run(parsed.chain, input, ctx)).msg.data;
  } catch (err) {
    if (deliveryError) throw deliveryError.err;
    if (!answered) throw err;
    if (!stop.signal.aborted) {
      const where = err instanceof ChainError ? { chainId: err.chainId, nodeId: err.nodeId } : {};
      const detail = { ...where, err: err instanceof Error ? err.message : String(err) };
      if (signal.aborted) log.info(detail, 'the nodes after the ai/agent node were cancelled; the answer was already delivered');
      else log.warn(detail, 'a node after the ai/agent node failed; the answer was already delivered and the run stays succeeded');
    }
    return;
  }
  if (deliveryError) throw deliveryError.err;
  // Post-agent nodes' changes to msg.data do not change what was delivered.
  if (answered) return;
  await emit({ type: 'text', text: final });
  await deliver({ output: final, added: [{ role: 'assistant', content: final }], usage: null, finishReason: 'stop' });
}

/** The registered error a failure is or wraps (through `cause`, a few levels at most), if any. */
function registeredCause(err: unknown): AppError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e instanceof Error; depth++, e = e.cause) if (isAppError(e)) return e;
  return undefined;
}
