import Type, { type Static } from 'typebox';
import { HeartbeatSettings } from '@agentry/contracts';
import { AUTHORITY, type Capability } from './authority/policy.js';
import { heartbeatProblems } from '@agentry/runs';

/**
 * The configuration of an agent (its `ai/agent` node): what the DSL accepts, what the worker's
 * agent loop reads and what the `ai/agent` node type hands to `ChainContext.runAgent`. It lives
 * here, with the agent code, so that the chain types can name it without importing the node
 * registry.
 */

/** Shortest `tools[].timeout` accepted (ms): anything below is almost surely seconds by mistake. */
export const MIN_TOOL_TIMEOUT_MS = 1000;
/** Per-call tool timeout when `tools[].timeout` is absent (ms). */
export const DEFAULT_TOOL_TIMEOUT_MS = 120_000;

const Params = Type.Record(Type.String(), Type.Unknown(), {
  description: 'temperature, topP, maxTokens, stop, responseFormat, ... passed to the provider',
});

const Tool = Type.Object({
  /** builtin | rulechain | agent | mcp; anything else is left out with a warning when the agent runs. */
  type: Type.Optional(Type.String(AUTHORITY)),
  name: Type.Optional(Type.String(AUTHORITY)),
  description: Type.Optional(Type.String()),
  targetId: Type.Optional(Type.String(AUTHORITY)),
  timeout: Type.Optional(Type.Integer({ minimum: 1, description: `milliseconds one call may take (default ${DEFAULT_TOOL_TIMEOUT_MS}, at least ${MIN_TOOL_TIMEOUT_MS})` })),
  config: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), { description: "the tool type's own settings: an MCP server's url and headers, a rule chain's parameters, ..." }),
  ),
}, { additionalProperties: false });

/** The `config` of an `mcp` tool entry (checked by the authority templates and shown in forms). */
export const McpToolConfig = Type.Object({
  url: Type.String({ description: 'the server\'s Streamable HTTP URL' }),
  headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  allowPrivateNetworks: Type.Optional(Type.Boolean({ description: 'allow a loopback, private or link-local server address (default false; admin-only), as for http_fetch', ...AUTHORITY })),
  allowHosts: Type.Optional(Type.Array(Type.String(), { description: 'hosts allowed whatever they resolve to; "*.example.com" matches subdomains (admin-only)', ...AUTHORITY })),
});

const Failover = Type.Object({
  provider: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
  params: Type.Optional(Params),
}, { additionalProperties: false });

/** Per-agent context compaction: any field given overrides `agents.defaults.session.compaction`. */
const Compaction = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal('off'), Type.Literal('auto')], { description: 'auto: compact before a turn over budget; off: never' })),
  strategy: Type.Optional(
    Type.Union([Type.Literal('summary'), Type.Literal('sliding_window')], { description: 'summary (stored, sent in place of older turns) or sliding_window (oldest turns left out)' }),
  ),
  keepRecentCount: Type.Optional(Type.Integer({ minimum: 1, description: 'newest stored messages always sent as they are' })),
  targetTokensPercent: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: "budget: this percent of the model's context_window" })),
  minMessagesToCompact: Type.Optional(Type.Integer({ minimum: 1, description: 'fewer stored messages in the context are not summarised' })),
}, { additionalProperties: false });

/** The agent's heartbeat (its schema is the REST API's, which edits it on its own too). */
const Heartbeat = HeartbeatSettings;

export const AiAgentConfiguration = Type.Object({
  provider: Type.Optional(Type.String({ description: 'provider id; models.default_provider when absent' })),
  model: Type.Optional(Type.String()),
  systemPrompt: Type.Optional(Type.String()),
  params: Type.Optional(Params),
  maxStep: Type.Optional(Type.Integer({ minimum: 1 })),
  maxToolOutputLength: Type.Optional(Type.Integer({ minimum: 1 })),
  tools: Type.Optional(Type.Array(Tool)),
  failover: Type.Optional(Type.Array(Failover)),
  disabledSkills: Type.Optional(Type.Array(Type.String())),
  compaction: Type.Optional(Compaction),
  heartbeat: Type.Optional(Heartbeat),
  clientTools: Type.Optional(Type.Boolean({ description: "false: a chat or Responses request's own function tools are refused (400) instead of offered to the model beside the agent's (default true)" })),
}, { additionalProperties: false });

/** An agent's heartbeat settings, as the DSL holds them (the contracts' type: heartbeat.ts reads it without importing this file). */
export type HeartbeatConfig = HeartbeatSettings;

/**
 * One entry of `tools[]`. Its `config` belongs to the tool's type (an MCP server's url and
 * headers, a rule chain's parameters, a built-in's options), so the schema leaves it unchecked
 * and only the type names it.
 */
export type AgentToolConfig = Static<typeof Tool>;

/** What building a (resolved) tool entry asks of the authority policy. */
export function toolCapability(entry: AgentToolConfig): Capability {
  return { kind: 'tool', type: entry.type ?? 'builtin', name: entry.name, config: entry.config ?? {} };
}

/** The configuration of an `ai/agent` node, as `runAgent` receives it. */
export type AiAgentConfig = Static<typeof AiAgentConfiguration>;

const TOOL_ENTRY = /^configuration\.tools\[\d+\]$/;

/**
 * A tool entry's own settings go under `config`; written beside `type` and `name` they used to be
 * stored and ignored (a rule chain tool offered with an empty schema), so say where they belong.
 */
export function agentUnknownFieldHint(path: string, key: string): string | undefined {
  if (TOOL_ENTRY.test(path)) return `did you mean config.${key}? a tool's own settings go under config`;
  if (path === 'configuration' && (key === 'prompt' || key === 'system_prompt' || key === 'instructions')) return 'did you mean systemPrompt?';
  if (path === 'configuration' && (key === 'max_steps' || key === 'maxSteps')) return 'did you mean maxStep?';
  return undefined;
}

/** Why `tools[index].timeout` is refused, or undefined when it is fine (absent or >= 1000 ms). */
export function toolTimeoutProblem(timeout: number | undefined, index: number): string | undefined {
  if (timeout === undefined || timeout >= MIN_TOOL_TIMEOUT_MS) return undefined;
  return `tools[${index}].timeout is in milliseconds; ${timeout} ms is too short — did you mean ${timeout * 1000}?`;
}

/** What the schema cannot say about an agent's configuration, as `path message` lines. */
export function agentConfigProblems(config: AiAgentConfig): string[] {
  const problems: string[] = [];
  (config.tools ?? []).forEach((tool, i) => {
    const problem = toolTimeoutProblem(tool.timeout, i);
    if (problem) problems.push(problem);
  });
  if (config.heartbeat) problems.push(...heartbeatProblems(config.heartbeat));
  return problems;
}
