import { AGENT_NODE_TYPE, RuleChainDsl, isAgentChain, schemaErrors } from './dsl.js';
import { nodeTypes } from './nodes/index.js';

interface ValidationResult {
  ok: boolean;
  /** One line per problem, naming the node or connection: `metadata.nodes[2] ("n1"): ...`. */
  errors: string[];
}

interface ValidateOptions {
  /** Agents need at least one `ai/agent` node. */
  requireAgent?: boolean;
}

/**
 * Checks a chain completely: its shape, then what a schema cannot say (unique node ids,
 * connections between existing nodes, known node types, each node's configuration against its
 * type's schema and then its type's own `validate`, firstNodeIndex in range).
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
    const config = node.configuration ?? {};
    const schema = schemaErrors(def.configuration, config, 'configuration', def.unknownFieldHint);
    for (const e of schema) errors.push(`${where}, ${node.type}: ${e}`);
    // The type's own checks see only a configuration its schema accepted.
    if (schema.length === 0 && def.validate) {
      for (const problem of def.validate(config)) errors.push(`${where}, ${node.type}: configuration.${problem}`);
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

