import type { TSchema } from 'typebox';
import { McpToolConfig } from '@agentry/definitions';
import { builtinTools, nodeTypes } from '@agentry/engine';

/**
 * What the run-time authority matrix (authority-matrix.test.ts) enumerates, read from the schemas
 * the engine validates with, so that a power added tomorrow shows up here without anyone listing
 * it: every field marked `x-authority` (the `AUTHORITY` mark) in a node type's configuration, an
 * `ai/agent` tool entry, a built-in tool's config or an MCP entry's config, and every header map
 * (a sealed credential travels there).
 */

/** One field of a definition that grants a power, named `<carrier> <path>`. */
export interface PowerField {
  /** e.g. `node restApiCall`, `tool bash`, `tool mcp`. */
  carrier: string;
  /** Dotted path inside the carrier's configuration; `[]` stands for any array item. */
  path: string;
  id: string;
}

type Walkable = TSchema & {
  'x-authority'?: boolean;
  properties?: Record<string, TSchema>;
  items?: TSchema;
  anyOf?: TSchema[];
  oneOf?: TSchema[];
};

function walk(schema: TSchema | undefined, path: string, visit: (s: Walkable, path: string, key: string) => void, key = ''): void {
  if (!schema) return;
  const s = schema as Walkable;
  visit(s, path, key);
  if (s.properties) for (const [k, sub] of Object.entries(s.properties)) walk(sub, path ? `${path}.${k}` : k, visit, k);
  if (s.items) walk(s.items, `${path}[]`, visit, key);
  for (const alt of [...(s.anyOf ?? []), ...(s.oneOf ?? [])]) walk(alt, path, visit, key);
}

/** Every schema whose fields can grant a power, by carrier name. */
function carriers(): Array<[string, TSchema]> {
  return [
    ...Object.entries(nodeTypes).map(([type, def]) => [`node ${type}`, def.configuration] as [string, TSchema]),
    ...Object.entries(builtinTools).flatMap(([name, tool]) => (tool.configSchema ? [[`tool ${name}`, tool.configSchema] as [string, TSchema]] : [])),
    ['tool mcp', McpToolConfig],
  ];
}

function collect(match: (s: Walkable, key: string) => boolean): PowerField[] {
  const out = new Map<string, PowerField>();
  for (const [carrier, schema] of carriers()) {
    walk(schema, '', (s, path, key) => {
      if (path && match(s, key)) out.set(`${carrier} ${path}`, { carrier, path, id: `${carrier} ${path}` });
    });
  }
  return [...out.values()];
}

/** Every field marked as granting authority (`x-authority: true`). */
export function authorityFields(): PowerField[] {
  return collect((s) => s['x-authority'] === true);
}

/** Every header map: whatever is written there is sent, so a credential sealed in it is a power. */
export function secretFields(): PowerField[] {
  return collect((_s, key) => /^headers$/i.test(key));
}

/** Every node type and every built-in tool: each must have a matrix entry or a reason it has none. */
export function nodeTypeNames(): string[] {
  return Object.keys(nodeTypes);
}

export function builtinToolNames(): string[] {
  return Object.keys(builtinTools);
}

/** Whether a built-in is off by default (an operator opts an agent into it): the powerful ones. */
export function optInTools(): string[] {
  return Object.values(builtinTools)
    .filter((t) => t.optIn)
    .map((t) => t.name);
}
