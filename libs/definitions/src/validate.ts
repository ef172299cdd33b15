import { AGENT_NODE_TYPE, RuleChainDsl, isAgentChain, schemaErrors, schemaProblems } from './dsl.js';
import { templatedAuthorityFields } from './authority/definition.js';
import { nodeSpecs } from './nodes/index.js';

/**
 * What an unknown field of a node's configuration is (Kubernetes' `fieldValidation`): `Strict`
 * an error, `Warn` kept and reported in `warnings`, `Ignore` kept silently. RuleGo decodes node
 * configurations leniently, so its files carry fields it ignores; a closed schema still catches
 * a misspelt field, which `Warn` reports without refusing the chain.
 */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';
export const FIELD_VALIDATIONS: readonly FieldValidation[] = ['Strict', 'Warn', 'Ignore'];

interface ValidationResult {
  ok: boolean;
  /** One line per problem, naming the node or connection: `metadata.nodes[2] ("n1"): ...`. */
  errors: string[];
  /** Unknown configuration fields under `Warn`, in the same form as errors. */
  warnings: string[];
}

interface ValidateOptions {
  /** Agents need at least one `ai/agent` node. */
  requireAgent?: boolean;
  /** Unknown node-configuration fields; `Strict` when absent. */
  fieldValidation?: FieldValidation;
}

/**
 * Checks a chain completely: its shape, then what a schema cannot say (unique node ids,
 * connections between existing nodes, known node types, each node's configuration against its
 * type's schema and then its type's own `validate`, firstNodeIndex in range).
 */
export function validateRuleChain(dsl: unknown, opts: ValidateOptions = {}): ValidationResult {
  const shape = schemaErrors(RuleChainDsl, dsl);
  if (shape.length > 0) return { ok: false, errors: shape, warnings: [] };
  const chain = dsl as RuleChainDsl;
  const errors: string[] = unsupportedRuleGoFields(chain);
  const warnings: string[] = [];
  const unknownFields = opts.fieldValidation ?? 'Strict';
  const { nodes, connections, firstNodeIndex } = chain.metadata;

  const seen = new Set<string>();
  nodes.forEach((node, i) => {
    const where = `metadata.nodes[${i}] ("${node.id}")`;
    if (seen.has(node.id)) errors.push(`${where}: duplicate node id "${node.id}"`);
    seen.add(node.id);
    const def = nodeSpecs[node.type];
    if (!def) {
      errors.push(`${where}: unknown node type "${node.type}" (known: ${Object.keys(nodeSpecs).join(', ')})`);
      return;
    }
    const config = node.configuration ?? {};
    const problems = schemaProblems(def.configuration, config, 'configuration', def.unknownFieldHint);
    const wrong = problems.filter((p) => !p.unknownField || unknownFields === 'Strict');
    for (const p of wrong) errors.push(`${where}, ${node.type}: ${p.text}`);
    if (unknownFields === 'Warn') for (const p of problems) if (p.unknownField) warnings.push(`${where}, ${node.type}: ${p.text}`);
    // What grants a power is decided on what is written: a template could fill it with anything later.
    const templated = templatedAuthorityFields(node.type, config);
    for (const path of templated) {
      errors.push(`${where}, ${node.type}: ${path} grants authority and may not be a \${...} template; write the value itself`);
    }
    // The type's own checks see only a configuration its schema accepted (fields it does not name aside).
    if (wrong.length === 0 && def.validate) {
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
  return { ok: errors.length === 0, errors, warnings };
}


/**
 * RuleGo fields Agentry knows but cannot honour. Storing them would promise behaviour that never
 * happens (an endpoint that is never started), so each is a named refusal instead. Unknown
 * fields, by contrast, are kept as written: they are an editor's, not a promise.
 */
function unsupportedRuleGoFields(chain: RuleChainDsl): string[] {
  const errors: string[] = [];
  const metadata = chain.metadata as Record<string, unknown>;
  if (nonEmpty(metadata.endpoints)) {
    errors.push(
      'metadata.endpoints: RuleGo endpoints (http, mqtt, schedule, ...) are not started by Agentry; its entry points are chat (/v1/chat/completions), cron jobs (/api/v1/cron) and channels (/api/v1/channels), or call the chain as a tool or through a flow node. Remove metadata.endpoints',
    );
  }
  if (nonEmpty(metadata.ruleChainConnections)) {
    errors.push('metadata.ruleChainConnections: connections to other chains are not followed; use a "flow" node with configuration.targetId naming the chain');
  }
  const configuration = chain.ruleChain.configuration ?? {};
  if (configuration.secrets !== undefined) {
    errors.push(
      'ruleChain.configuration.secrets: RuleGo\'s encrypted secrets (${secret.x}) cannot be decrypted here; write the value into the node configuration, where Agentry seals secret fields (tokens, passwords, auth headers) at rest',
    );
  }
  const vars = configuration.vars;
  if (vars !== undefined && (vars === null || typeof vars !== 'object' || Array.isArray(vars))) {
    errors.push('ruleChain.configuration.vars: must be an object of names to values');
  }
  return errors;
}

function nonEmpty(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) return value.length > 0;
  return typeof value !== 'object' || Object.keys(value).length > 0;
}
