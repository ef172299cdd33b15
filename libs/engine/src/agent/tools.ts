import type { Logger } from 'pino';
import { refusal, type RunAuthority, DEFAULT_TOOL_TIMEOUT_MS, toolCapability, toolTimeoutProblem, type AgentToolConfig } from '@agentry/definitions';
import { ToolError, type ToolContext, type ToolDefinition } from '../tools/types.js';
import { AddressNotAllowedError, assertPublicAddress, type AddressPolicy } from '../tools/net-policy.js';
import { policyFetch } from '../tools/policy-fetch.js';
import type { LoopTool } from './loop.js';

interface ResolveToolsDeps {
  logger: Logger;
  /** The powers of the agent whose tools these are: a tool it may not build is left out, refused. */
  authority: RunAuthority;
  builtin: Record<string, ToolDefinition>;
  /** Everything a built-in tool's context needs but the signal and its own config. */
  context: Omit<ToolContext, 'signal' | 'config'>;
  /** A nested run of another agent (toolType `subagent`); the caller enforces depth and cycles. */
  runSubagent(agentId: string, message: string, signal: AbortSignal): Promise<string>;
  /** Runs a rule chain with the arguments (and the entry's `config`: msgType, metadata, dataField) as its message; answers the final message (`chain/tool.ts`). */
  runChain(chainId: string, args: Record<string, unknown>, signal: AbortSignal, config: Record<string, unknown>): Promise<string>;
  /** A tool the policy refused: told to the run (a step), so that its people learn why the agent lacks it. */
  onRefused?(tool: string, why: string): void;
}

interface ResolvedTools {
  tools: LoopTool[];
  /** Problems met while resolving (unknown names, unreachable MCP servers): logged, not fatal. */
  warnings: string[];
  close(): Promise<void>;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Turns an agent's tool list into tools the loop can offer the model: built-ins by name, rule
 * chains, other agents (sub-agents) and the tools of MCP servers (`<name>__<tool>`). A tool that
 * cannot be resolved is left out with a warning; it never stops the agent.
 */
export async function resolveTools(configs: AgentToolConfig[], deps: ResolveToolsDeps): Promise<ResolvedTools> {
  const tools: LoopTool[] = [];
  const warnings: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  const warn = (message: string) => {
    warnings.push(message);
    deps.logger.warn(message);
  };
  const add = (tool: LoopTool) => {
    if (!TOOL_NAME.test(tool.name)) return warn(`tool name "${tool.name}" is not [A-Za-z0-9_-]{1,64}; left out`);
    if (tools.some((t) => t.name === tool.name)) return warn(`tool "${tool.name}" is listed twice; the first one is kept`);
    tools.push(tool);
  };

  for (const [index, cfg] of configs.entries()) {
    // Validation refuses a timeout under 1000 ms; one stored before that rule was seconds.
    const tooShort = toolTimeoutProblem(cfg.timeout, index);
    if (tooShort) warn(`${tooShort} The default (${DEFAULT_TOOL_TIMEOUT_MS} ms) is used.`);
    const timeoutMs = cfg.timeout && !tooShort ? cfg.timeout : undefined;
    const resolved = await resolveOne(cfg, deps);
    if (typeof resolved === 'string') {
      warn(resolved);
      continue;
    }
    if (resolved.close) closers.push(resolved.close);
    for (const tool of resolved.tools) add(timeoutMs ? { ...tool, timeoutMs } : tool);
  }
  return {
    tools,
    warnings,
    close: async () => {
      await Promise.allSettled(closers.map((c) => c()));
    },
  };
}

/** The tools of one `tools[]` entry (an MCP server may give several), or why it is left out. */
async function resolveOne(cfg: AgentToolConfig, deps: ResolveToolsDeps): Promise<{ tools: LoopTool[]; close?: () => Promise<void> } | string> {
  // Asked on the entry as it runs (templates filled), whatever the definition looked like when saved.
  const refused = refusal(deps.authority, toolCapability(cfg));
  if (refused !== undefined) {
    const tool = cfg.name ?? cfg.targetId ?? '';
    deps.onRefused?.(tool, refused);
    return `tool "${tool}" refused: ${refused}; left out`;
  }
  const type = cfg.type ?? 'builtin';
  switch (type) {
    case 'builtin':
      return one(builtinTool(cfg, deps));
    case 'rulechain':
      return one(ruleChainTool(cfg, deps));
    case 'agent':
    case 'subagent':
      return one(agentTool(cfg, deps));
    case 'mcp':
      return connectMcp(cfg, deps.logger).catch((err: unknown) => `MCP server "${cfg.name ?? ''}" is unreachable: ${(err as Error).message}; its tools are left out`);
    default:
      return `unknown tool type "${type}"; left out`;
  }
}

function one(tool: LoopTool | string): { tools: LoopTool[] } | string {
  return typeof tool === 'string' ? tool : { tools: [tool] };
}

function builtinTool(cfg: AgentToolConfig, deps: ResolveToolsDeps): LoopTool | string {
  const def = cfg.name ? deps.builtin[cfg.name] : undefined;
  if (!def) return `unknown built-in tool "${cfg.name ?? ''}"; left out`;
  return {
    name: def.name,
    description: cfg.description ?? def.description,
    parameters: def.parameters,
    toolType: 'builtin',
    run: (args, signal) => def.run(args, { ...deps.context, signal, config: cfg.config ?? {} }),
  };
}

function ruleChainTool(cfg: AgentToolConfig, deps: ResolveToolsDeps): LoopTool | string {
  if (!cfg.targetId) return `rule-chain tool "${cfg.name ?? ''}" has no targetId; left out`;
  const chainId = cfg.targetId;
  return {
    name: cfg.name ?? chainId,
    description: cfg.description ?? `Runs the rule chain ${chainId}.`,
    parameters: (cfg.config?.parameters as object | undefined) ?? chainToolParameters(cfg.config?.dataField),
    toolType: 'rulechain',
    run: (args, signal) => deps.runChain(chainId, args, signal, cfg.config ?? {}),
  };
}

/**
 * Without a `parameters` schema: any object, or with `dataField` that one argument, which may be
 * text or any JSON value (it becomes `msg.data` as it is).
 */
function chainToolParameters(dataField: unknown): object {
  if (typeof dataField !== 'string' || dataField === '') return { type: 'object', additionalProperties: true };
  return { type: 'object', properties: { [dataField]: { description: 'the message data: text or any JSON value' } }, required: [dataField] };
}

function agentTool(cfg: AgentToolConfig, deps: ResolveToolsDeps): LoopTool | string {
  if (!cfg.targetId) return `agent tool "${cfg.name ?? ''}" has no targetId; left out`;
  const agentId = cfg.targetId;
  return {
    name: cfg.name ?? agentId,
    description: cfg.description ?? `Asks the agent ${agentId} and returns its answer.`,
    parameters: {
      type: 'object',
      properties: { message: { type: 'string', description: 'what to ask the agent' } },
      required: ['message'],
    },
    toolType: 'subagent',
    run: (args, signal) => {
      if (typeof args.message !== 'string' || args.message.trim() === '') throw new ToolError('message must be a non-empty string');
      return deps.runSubagent(agentId, args.message, signal);
    },
  };
}

/** `allowPrivateNetworks` and `allowHosts` of an MCP entry's config, as http_fetch reads them. */
function mcpAddressPolicy(config: Record<string, unknown> | undefined): AddressPolicy {
  const hosts = config?.allowHosts;
  return {
    allowPrivateNetworks: config?.allowPrivateNetworks === true,
    allowHosts: Array.isArray(hosts) ? hosts.filter((h): h is string => typeof h === 'string') : [],
  };
}

/**
 * Connects to an MCP server over Streamable HTTP and lists its tools as `<name>__<tool>`. The URL
 * follows the outbound-address policy of http_fetch (public addresses only unless the entry's
 * config allows more): checked before connecting, and every request of the session goes through
 * `policyFetch`, which checks the address it connects to (DNS rebinding, redirects).
 */
async function connectMcp(cfg: AgentToolConfig, logger: Logger): Promise<{ tools: LoopTool[]; close: () => Promise<void> }> {
  const url = cfg.config?.url;
  if (typeof url !== 'string') throw new Error('config.url is missing');
  const prefix = cfg.name ?? 'mcp';
  const headers = (cfg.config?.headers as Record<string, string> | undefined) ?? {};
  const policy = mcpAddressPolicy(cfg.config);
  const target = await assertPublicAddress(url, policy).catch((err: unknown) => {
    throw err instanceof AddressNotAllowedError ? new Error(`refused by the outbound-address policy: ${err.message}`) : err;
  });
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const client = new Client({ name: 'agentry', version: '0.1.0' });
  const transport = new StreamableHTTPClientTransport(target, { requestInit: { headers }, fetch: policyFetch(policy) });
  await client.connect(transport);
  const listed = await client.listTools();
  logger.debug({ server: prefix, tools: listed.tools.map((t) => t.name) }, 'MCP tools listed');
  const tools: LoopTool[] = listed.tools.map((t) => ({
    name: `${prefix}__${t.name}`,
    description: t.description ?? t.name,
    parameters: (t.inputSchema as object | undefined) ?? { type: 'object' },
    toolType: 'mcp',
    run: async (args, signal) => {
      const result = await client.callTool({ name: t.name, arguments: args }, undefined, { signal });
      const content = (result.content as Array<{ type: string; text?: string }> | undefined) ?? [];
      const text = content.map((c) => (c.type === 'text' ? (c.text ?? '') : `[${c.type}]`)).join('\n');
      if (result.isError) throw new ToolError(text || 'the MCP tool failed');
      return text;
    },
  }));
  return { tools, close: () => client.close() };
}
