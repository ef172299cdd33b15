import Type, { type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { nodeTypes } from './nodes/index.js';

/**
 * The rule-chain DSL (RuleGo's shape, as TpClaw uses it): `ruleChain` names the chain,
 * `metadata` holds its nodes and the connections between them. An agent is a chain with an
 * `ai/agent` node; its id is the chat `model`.
 *
 * Objects inside the DSL accept fields beyond the ones listed (RuleGo editors add layout data
 * and the like) and keep them; only the top level is closed.
 */

/** Ids of chains and nodes, skill names: letters, digits, `_` and `-`, 1 to 64 of them. */
export const ID_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
export const ID_REGEX = new RegExp(ID_PATTERN);
export const Id = Type.String({ pattern: ID_PATTERN, description: 'letters, digits, _ and -, 1 to 64 characters' });

const Info = Type.Record(Type.String(), Type.Unknown());

function ruleChainInfo<T extends TSchema>(id: T) {
  return Type.Object({
    id,
    name: Type.String({ minLength: 1, maxLength: 200 }),
    root: Type.Optional(Type.Boolean()),
    debugMode: Type.Optional(Type.Boolean()),
    /** `category` (the `GET /rules?category=` filter), `description`, `icon`, ... */
    additionalInfo: Type.Optional(Info),
    configuration: Type.Optional(Info),
  });
}

export const RuleNode = Type.Object({
  id: Id,
  type: Type.String({ minLength: 1, maxLength: 100 }),
  name: Type.Optional(Type.String({ maxLength: 200 })),
  debugMode: Type.Optional(Type.Boolean()),
  additionalInfo: Type.Optional(Info),
  /** Checked against the node type's schema by `validateRuleChain`. */
  configuration: Type.Optional(Info),
});
export type RuleNode = Static<typeof RuleNode>;

export const RuleConnection = Type.Object({
  fromId: Type.String({ minLength: 1 }),
  toId: Type.String({ minLength: 1 }),
  /** Relation: `Success`, `Failure`, `Stream`, a filter's `True`/`False`, a switch's case. */
  type: Type.String({ minLength: 1, maxLength: 100 }),
});
export type RuleConnection = Static<typeof RuleConnection>;

export const RuleMetadata = Type.Object({
  firstNodeIndex: Type.Optional(Type.Integer({ minimum: 0 })),
  nodes: Type.Array(RuleNode, { maxItems: 1000 }),
  connections: Type.Array(RuleConnection, { maxItems: 5000 }),
});

/** A complete chain as stored and as `POST /agents` and `POST /rules` take it. */
export const RuleChainDsl = Type.Object(
  { ruleChain: ruleChainInfo(Id), metadata: RuleMetadata },
  { additionalProperties: false },
);
export type RuleChainDsl = Static<typeof RuleChainDsl>;

/** `PUT` bodies: the id may be left out (the path names the chain). */
export const RuleChainUpdate = Type.Object(
  { ruleChain: ruleChainInfo(Type.Optional(Id)), metadata: RuleMetadata },
  { additionalProperties: false },
);
export type RuleChainUpdate = Static<typeof RuleChainUpdate>;

export interface ValidationResult {
  ok: boolean;
  /** One line per problem, naming the node or connection: `metadata.nodes[2] ("n1"): ...`. */
  errors: string[];
}

export interface ValidateOptions {
  /** Agents need at least one `ai/agent` node. */
  requireAgent?: boolean;
}

export const AGENT_NODE_TYPE = 'ai/agent';

/**
 * Checks a chain completely: its shape, then what a schema cannot say (unique node ids,
 * connections between existing nodes, known node types, each node's configuration against its
 * type's schema, firstNodeIndex in range).
 */
export function validateRuleChain(dsl: unknown, opts: ValidateOptions = {}): ValidationResult {
  const shape = schemaErrors(RuleChainDsl, dsl);
  if (shape.length > 0) return { ok: false, errors: shape };
  const chain = dsl as RuleChainDsl;
  const errors: string[] = [];
  const { nodes, connections, firstNodeIndex } = chain.metadata;

  const seen = new Set<string>();
  nodes.forEach((node, i) => {
    const where = `metadata.nodes[${i}] ("${node.id}")`;
    if (seen.has(node.id)) errors.push(`${where}: duplicate node id "${node.id}"`);
    seen.add(node.id);
    const def = nodeTypes[node.type];
    if (!def) {
      errors.push(`${where}: unknown node type "${node.type}" (known: ${Object.keys(nodeTypes).join(', ')})`);
      return;
    }
    for (const e of schemaErrors(def.configuration, node.configuration ?? {}, 'configuration')) {
      errors.push(`${where}, ${node.type}: ${e}`);
    }
  });

  connections.forEach((c, i) => {
    for (const end of ['fromId', 'toId'] as const) {
      if (!seen.has(c[end])) errors.push(`metadata.connections[${i}]: ${end} "${c[end]}" is not a node of this chain`);
    }
  });

  if (firstNodeIndex !== undefined && nodes.length > 0 && firstNodeIndex >= nodes.length) {
    errors.push(`metadata.firstNodeIndex: ${firstNodeIndex} is out of range (the chain has ${nodes.length} nodes)`);
  }
  if (opts.requireAgent && !isAgentChain(chain)) {
    errors.push(`metadata.nodes: an agent needs a node of type "${AGENT_NODE_TYPE}"`);
  }
  return { ok: errors.length === 0, errors };
}

/** Does the chain have an `ai/agent` node? */
export function isAgentChain(dsl: RuleChainDsl): boolean {
  return dsl.metadata.nodes.some((n) => n.type === AGENT_NODE_TYPE);
}

/** `ruleChain.additionalInfo.category` when it is a string. */
export function chainCategory(dsl: RuleChainDsl): string | null {
  const category = dsl.ruleChain.additionalInfo?.category;
  return typeof category === 'string' ? category : null;
}

/** TypeBox errors as `path: message` lines, `path` in dotted form (`metadata.nodes[1].id`). */
export function schemaErrors(schema: TSchema, value: unknown, root = ''): string[] {
  const out: string[] = [];
  for (const e of Value.Errors(schema, value)) {
    if (e.keyword === 'boolean') continue; // repeats an additionalProperties error
    const path = pointerToPath(root, e.instancePath);
    if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperties?: string[] }).additionalProperties ?? [];
      for (const key of extra) out.push(`${path ? `${path}.` : ''}${key}: unknown field`);
      continue;
    }
    out.push(`${path || '(root)'}: ${e.message}`);
  }
  return [...new Set(out)];
}

function pointerToPath(root: string, pointer: string): string {
  let path = root;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += /^\d+$/.test(part) ? `[${part}]` : path ? `.${part}` : part;
  }
  return path;
}
