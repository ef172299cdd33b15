import type { TSchema } from 'typebox';
import { McpToolConfig, type AgentToolConfig } from '../agent-config.js';
import { chainVars, fillChainVars } from '../chain-vars.js';
import type { RuleChainDsl } from '../dsl.js';
import { nodeSpecs } from '../nodes/index.js';
import { builtinToolSpecs } from '../tools/index.js';
import { refusal, type RunAuthority } from './policy.js';

/**
 * The save-time side of the authority model: which fields of a definition grant authority (read
 * from the schemas: a field marked `AUTHORITY`, `x-authority: true`, in a node type's
 * configuration, an `ai/agent` tool entry or a tool's config), and what the policy says about a
 * definition resolved as the runner will resolve it.
 */

const TEMPLATE = /\$\{/;

/** The schema of a tool entry's `config`: a built-in's own, an MCP server's; rule chains and agents hold no power there. */
function toolConfigSchema(entry: AgentToolConfig): TSchema | undefined {
  const type = entry.type ?? 'builtin';
  if (type === 'mcp') return McpToolConfig;
  if (type === 'builtin' && entry.name !== undefined) return builtinToolSpecs[entry.name]?.configSchema;
  return undefined;
}

function holdsTemplate(value: unknown): boolean {
  if (typeof value === 'string') return TEMPLATE.test(value);
  if (Array.isArray(value)) return value.some(holdsTemplate);
  if (value !== null && typeof value === 'object') return Object.values(value).some(holdsTemplate);
  return false;
}

/** Paths under `value` where a field its schema marks as granting authority is written as a template. */
function templatedIn(schema: TSchema | undefined, value: unknown, path: string, out: string[]): void {
  if (!schema || value === undefined) return;
  const s = schema as TSchema & { 'x-authority'?: boolean; properties?: Record<string, TSchema>; items?: TSchema };
  if (s['x-authority'] === true && holdsTemplate(value)) {
    out.push(path);
    return;
  }
  if (Array.isArray(value) && s.items) value.forEach((v, i) => templatedIn(s.items, v, `${path}[${i}]`, out));
  else if (value !== null && typeof value === 'object' && s.properties) {
    for (const [key, sub] of Object.entries(s.properties)) templatedIn(sub, (value as Record<string, unknown>)[key], `${path}.${key}`, out);
  }
}

/** Every field of a node configuration that grants authority and is written as a `${...}` template. */
export function templatedAuthorityFields(type: string, configuration: unknown): string[] {
  const def = nodeSpecs[type];
  if (!def) return [];
  const out: string[] = [];
  templatedIn(def.configuration, configuration, 'configuration', out);
  const tools = (configuration as { tools?: unknown } | null)?.tools;
  if (type === 'ai/agent' && Array.isArray(tools)) {
    tools.forEach((entry: AgentToolConfig, i) => {
      if (entry !== null && typeof entry === 'object') templatedIn(toolConfigSchema(entry), entry.config, `configuration.tools[${i}].config`, out);
    });
  }
  return out;
}

/**
 * Why `authority` may not save `dsl`, one line per refusal: each node resolved as the runner
 * resolves it (`${vars}` from the chain, `${global}` from `globals`) and asked about every
 * capability its type declares, through the same policy function the run asks.
 */
export function definitionRefusals(dsl: RuleChainDsl, authority: RunAuthority, globals: Readonly<Record<string, string>>): string[] {
  const env = { vars: chainVars(dsl), global: globals };
  const out: string[] = [];
  dsl.metadata.nodes.forEach((node, i) => {
    const def = nodeSpecs[node.type];
    if (!def?.capabilities) return;
    const config = fillChainVars(node.configuration ?? {}, env);
    for (const cap of def.capabilities(config as never)) {
      const why = refusal(authority, cap);
      if (why !== undefined) out.push(`metadata.nodes[${i}] ("${node.id}"): ${why}`);
    }
  });
  return out;
}


/** A chain or agent a definition names: where (`path`, as validation errors spell it) and what. */
export interface DefinitionReference {
  path: string;
  target: 'chain' | 'agent';
  id: string;
}

/**
 * Every chain and agent a definition names: `flow` nodes' `targetId`, and the `targetId` of
 * `ai/agent` tool entries of type `rulechain` (a chain) or `agent`/`subagent` (an agent). The
 * gateway refuses a save naming one that does not exist and a delete of one that is named.
 */
export function definitionReferences(dsl: unknown): DefinitionReference[] {
  const nodes = (dsl as { metadata?: { nodes?: unknown } } | null)?.metadata?.nodes;
  if (!Array.isArray(nodes)) return [];
  const out: DefinitionReference[] = [];
  nodes.forEach((node: { type?: unknown; configuration?: { targetId?: unknown; tools?: unknown } } | null, i) => {
    const config = node?.configuration;
    if (!config || typeof config !== 'object') return;
    if (node.type === 'flow' && typeof config.targetId === 'string') out.push({ path: `metadata.nodes[${i}].configuration.targetId`, target: 'chain', id: config.targetId });
    if (node.type !== 'ai/agent' || !Array.isArray(config.tools)) return;
    config.tools.forEach((tool: { type?: unknown; targetId?: unknown } | null, j) => {
      if (!tool || typeof tool.targetId !== 'string') return;
      const type = tool.type ?? 'builtin';
      const target = type === 'rulechain' ? 'chain' : type === 'agent' || type === 'subagent' ? 'agent' : undefined;
      if (target) out.push({ path: `metadata.nodes[${i}].configuration.tools[${j}].targetId`, target, id: tool.targetId });
    });
  });
  return out;
}
