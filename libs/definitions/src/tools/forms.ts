import Type from 'typebox';
import { DEFAULT_TOOL_TIMEOUT_MS, McpToolConfig, MIN_TOOL_TIMEOUT_MS } from '../agent-config.js';
import { nodeSpecs } from '../nodes/index.js';
import { builtinToolSpecs } from './index.js';

/**
 * What a configuration form needs (`GET /tools`, `GET /tools/forms`): the built-in tools with the
 * JSON schemas of their arguments and of their per-agent `config`, every node type with the
 * schema of its `configuration`, and the shape of one entry of an `ai/agent` node's `tools`.
 */

const TOOL_KINDS = ['builtin', 'rulechain', 'agent', 'mcp'] as const;
type ToolKind = (typeof TOOL_KINDS)[number];

/** One entry of an `ai/agent` node's `tools` (what the agent loop's resolveTools reads). */
const AgentToolEntry = Type.Object({
  type: Type.Optional(Type.Union(TOOL_KINDS.map((k) => Type.Literal(k)), { description: 'what the tool is (default builtin)' })),
  name: Type.Optional(Type.String({ description: 'builtin: the tool\'s name; rulechain and agent: the name the model sees; mcp: the prefix of the server\'s tools' })),
  description: Type.Optional(Type.String({ description: 'overrides the description the model sees' })),
  targetId: Type.Optional(Type.String({ description: 'rulechain: the rule chain id; agent: the agent id' })),
  config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'builtin: the tool\'s settings (see its config schema); rulechain: {parameters}; mcp: {url, headers, allowPrivateNetworks, allowHosts}' })),
  timeout: Type.Optional(
    Type.Integer({ minimum: MIN_TOOL_TIMEOUT_MS, description: `milliseconds one call may take (default ${DEFAULT_TOOL_TIMEOUT_MS})` }),
  ),
});

/** The `config` of each tool kind other than builtin (whose config is per tool). */
const KIND_FORMS: Record<Exclude<ToolKind, 'builtin'>, { description: string; required: string[]; config: object }> = {
  rulechain: {
    description: 'runs a rule chain with the call\'s arguments as msg.data; its final msg.data is the result',
    required: ['name', 'targetId'],
    config: Type.Object({ parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'JSON schema of the arguments' })) }),
  },
  agent: {
    description: 'asks another agent (a nested run) and returns its answer',
    required: ['targetId'],
    config: Type.Object({}),
  },
  mcp: {
    description: 'the tools of an MCP server over Streamable HTTP, offered as <name>__<tool>',
    required: ['name', 'config'],
    config: McpToolConfig,
  },
};

interface ToolListItem {
  name: string;
  description: string;
  parameters: object;
  optIn: boolean;
}

/** `GET /tools`: the built-in tools. */
export function toolList(): ToolListItem[] {
  return Object.values(builtinToolSpecs).map((t) => ({ name: t.name, description: t.description, parameters: t.parameters, optIn: t.optIn ?? false }));
}

/** `GET /tools/forms`. */
export function toolForms() {
  return {
    nodes: Object.values(nodeSpecs).map((n) => ({ type: n.type, description: n.description, configuration: n.configuration })),
    tools: Object.values(builtinToolSpecs).map((t) => ({
      name: t.name,
      description: t.description,
      optIn: t.optIn ?? false,
      parameters: t.parameters,
      config: t.configSchema,
    })),
    toolKinds: [...TOOL_KINDS],
    toolKindForms: [
      { kind: 'builtin', description: 'a tool of this service, by name (see tools)', required: ['name'], config: null },
      ...Object.entries(KIND_FORMS).map(([kind, f]) => ({ kind, ...f })),
    ],
    toolEntry: AgentToolEntry,
  };
}
