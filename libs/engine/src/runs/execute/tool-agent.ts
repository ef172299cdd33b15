import { REFUSED_TOOL_STEP, type RunRequest } from '@agentry/contracts';
import { AppError } from '@agentry/errors';
import { DEFAULT_TOOL_TIMEOUT_MS, type AgentToolConfig, type AiAgentConfig, chainSharing, enter, subagentRefusal, timeOf } from '@agentry/definitions';
import { runAgentLoop, type AgentLoopOptions, type AgentLoopResult, type LoopTool } from '../../agent/loop.js';
import { resolveTools } from '../../agent/tools.js';
import type { ChainTraceEntry } from '../../chain/runner.js';
import { chainToolFailure, chainToolInput, chainToolResult, type ChainToolConfig, type ChainToolResult } from '../../chain/tool.js';
import type { ChatMessage } from '../../models/types.js';
import type { ToolContext } from '../../tools/types.js';
import { chainContext } from './chain-context.js';
import { agentNode, modelParams } from './conversation.js';
import { silent, type AgentRun } from './deps.js';
import { loadChain, readAgent } from './stored.js';
import { assertAgentEnabled } from '@agentry/runs';
import { silentConversation } from './system-prompt.js';

/*
 * The tool loop and the agents it calls back into (sub-agents, rule-chain tools, silent
 * `ai/agent` nodes) live in one module: they call each other recursively, and split apart they
 * would import each other in a cycle.
 */

/** What one agent is asked: its configuration and conversation; `request` when it answers a client (its model parameters). */
interface AgentTurn {
  config: AiAgentConfig;
  messages: ChatMessage[];
  request?: RunRequest;
}

/**
 * One agent's tool loop: resolves its tools (built-ins, rule chains, sub-agents, MCP) and runs
 * the loop. Sub-agents run silently (their answer is the tool result), nest at most
 * MAX_AGENT_DEPTH deep, and an agent already on the stack cannot be called again (cycle).
 */
export async function runAgentWithTools(ctx: AgentRun, turn: AgentTurn): Promise<AgentLoopResult> {
  const { deps } = ctx;
  const resolved = await resolveTools(toolConfigs(turn.config), {
    logger: deps.logger,
    authority: ctx.authority,
    builtin: deps.builtin,
    context: toolContext(ctx),
    runSubagent: (agentId, message, signal) => runSubagent(silent(ctx, { signal }), agentId, message),
    runChain: (chainId, args, signal, config) => runChainTool({ ...ctx, signal }, chainId, args, config),
    onRefused: (tool, why) => ctx.note(refusedToolStep(ctx, tool, why)),
  });
  try {
    refuseClashes(resolved.tools, turn.request?.clientTools);
    return await runAgentLoop({ stream: deps.stream, emit: ctx.emit, logger: deps.logger }, loopOptions(turn), turn.messages, resolved.tools.map((t) => bounded(ctx, t)), ctx.signal);
  } finally {
    await resolved.close();
  }
}

/**
 * The step of a refused tool. The agent's owner reads a run's steps: a definition of theirs
 * gets the policy's full words; another owner's (a shared sub-agent) is only named, since its
 * tools are its owner's configuration, not theirs to read.
 */
function refusedToolStep({ authority, stack }: AgentRun, tool: string, why: string): ChainTraceEntry {
  const agentId = stack.at(-1) ?? '';
  const error =
    authority.owner === authority.agentOwner
      ? `tool "${tool}" of agent "${agentId}" was left out: ${why}`
      : `a tool of agent "${agentId}" (owned by "${authority.owner}") was left out: this run does not have the powers it needs`;
  return { nodeId: '', type: REFUSED_TOOL_STEP, relations: [], ms: 0, error };
}

/**
 * A client tool named like one of the agent's would be ambiguous (whose runs a call?): the
 * request is refused, naming them. Checked here, where the agent's tools are resolved (an MCP
 * server's names are known only now).
 */
function refuseClashes(tools: LoopTool[], clientTools: RunRequest['clientTools']): void {
  if (!clientTools?.length) return;
  const own = new Set(tools.map((t) => t.name));
  const clashes = [...new Set(clientTools.map((t) => t.name).filter((n) => own.has(n)))];
  if (clashes.length > 0) {
    throw new AppError('VALIDATION', 400, `tools: ${clashes.map((n) => `"${n}"`).join(', ')} ${clashes.length === 1 ? 'is the name of a tool' : 'are names of tools'} the agent has already; rename the client's ${clashes.length === 1 ? 'tool' : 'tools'}`);
  }
}

/** A tool under the run's bounds: each call counts, and its timeout stays under the ceiling. */
function bounded({ limits }: AgentRun, tool: LoopTool): LoopTool {
  return {
    ...tool,
    timeoutMs: limits.toolTimeout(tool.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS),
    run: (args, signal) => {
      limits.toolCall();
      return tool.run(args, signal);
    },
  };
}

/** An `ai/agent` node that does not answer the client: its instructions and `text` as the user turn, nothing streamed. */
export async function runSilentAgent(ctx: AgentRun, config: AiAgentConfig, text: string): Promise<string> {
  const messages = await silentConversation(ctx.deps, config, ctx.stack.at(-1)!, text);
  const result = await runAgentWithTools(silent(ctx), { config, messages });
  return result.output;
}

/** The skill tool must not load what the agent disabled: it gets the list through its config. */
function toolConfigs(config: AiAgentConfig): AgentToolConfig[] {
  return (config.tools ?? []).map((t) =>
    (t.type ?? 'builtin') === 'builtin' && t.name === 'skill' && config.disabledSkills?.length
      ? { ...t, config: { ...t.config, disabledSkills: config.disabledSkills } }
      : t,
  );
}

/** What a built-in tool of the executing agent sees (its signal and config come per call). */
function toolContext({ deps, run, stack, authority }: AgentRun): Omit<ToolContext, 'signal' | 'config'> {
  return {
    db: deps.db,
    authority,
    agentId: stack.at(-1)!,
    runId: run.id,
    sessionId: run.sessionId,
    logger: deps.logger,
    maxFileBytes: deps.maxFileBytes,
    workspaceByteLimit: () => deps.workspaceByteLimit(stack.at(-1)!),
    allowUnsandboxedBash: deps.allowUnsandboxedBash(),
    publishInvalidate: (message) => deps.publishInvalidate(message),
    sendMessage: deps.sendMessage,
  };
}

function loopOptions({ config, request }: AgentTurn): AgentLoopOptions {
  const failover = (config.failover ?? []).filter((f): f is typeof f & { provider: string } => typeof f.provider === 'string');
  return {
    provider: config.provider,
    model: config.model,
    failover,
    params: modelParams(config, request),
    ...(config.maxStep ? { maxStep: config.maxStep } : {}),
    ...(config.maxToolOutputLength ? { maxToolOutputLength: config.maxToolOutputLength } : {}),
    ...(request?.clientTools?.length ? { clientTools: request.clientTools } : {}),
    ...(request?.clientTools?.length && request.toolChoice !== undefined ? { toolChoice: request.toolChoice } : {}),
    ...(request?.parallelToolCalls !== undefined ? { parallelToolCalls: request.parallelToolCalls } : {}),
  };
}

/** Another agent called as a tool: `message` is its user turn, its answer the tool's result. */
async function runSubagent(ctx: AgentRun, agentId: string, message: string): Promise<string> {
  const { stack } = ctx;
  if (stack.includes(agentId)) throw new AppError('VALIDATION', 400, `agent ${agentId} is already running in this chain (${[...stack, agentId].join(' -> ')})`);
  const calls = ctx.limits.enter(ctx.calls, agentId);
  const sub = await readAgent(ctx.deps, agentId);
  const config = sub?.kind === 'agent' ? agentNode(sub.dsl) : undefined;
  if (!config) throw new AppError('NOT_FOUND', 404, `agent "${agentId}" does not exist`);
  // Switched off means it runs for nobody, another agent included.
  assertAgentEnabled(sub!);
  const refused = await subagentRefusal(ctx.deps.db, ctx.authority, sub!);
  if (refused !== undefined) throw new AppError('FORBIDDEN', 403, refused);
  const lends = chainSharing((sub!.dsl as { ruleChain?: { configuration?: unknown } }).ruleChain?.configuration, ctx.authority.owner).lends;
  const subCtx = { ...ctx, stack: [...stack, agentId], calls, authority: await enter(ctx.deps.db, ctx.authority, sub!.owner, lends, timeOf(sub!.updatedAt)) };
  const messages = await silentConversation(ctx.deps, config, agentId, message);
  const result = await runAgentWithTools(subCtx, { config, messages });
  return result.output;
}

/**
 * A rule-chain tool: the arguments (with the entry's msgType and metadata) become the message,
 * the chain runs, and the final message with its metadata, type and end relation is the tool's
 * result, as JSON (`chain/tool.ts`); a node failure ends on Failure there rather than failing the
 * call. `ai/llm` nodes call the agent's providers, `ai/agent` nodes run a silent nested agent
 * loop on behalf of the calling agent, `flow` nodes run sub-chains.
 */
async function runChainTool(ctx: AgentRun, chainId: string, args: Record<string, unknown>, config: ChainToolConfig): Promise<string> {
  const chain = chainContext(ctx, (inner, agentConfig, msg) => runSilentAgent(inner, agentConfig, msg.data));
  const input = chainToolInput(args, config);
  let result: ChainToolResult;
  try {
    result = chainToolResult(await ctx.deps.chains.runner.runById((id) => loadChain(ctx.deps, id), chainId, input, chain), input);
  } catch (err) {
    const failed = chainToolFailure(err);
    if (!failed || ctx.signal.aborted) throw err;
    result = failed;
  }
  return JSON.stringify(result);
}
