import Type, { type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';

/**
 * The rule-chain DSL (RuleGo's shape, as TpClaw uses it): `ruleChain` names the chain,
 * `metadata` holds its nodes and the connections between them. An agent is a chain with an
 * `ai/agent` node; its id is the chat `model`.
 *
 * Objects inside the DSL accept fields beyond the ones listed (RuleGo editors add layout data
 * and the like) and keep them; only the top level is closed. Checking a chain against the node
 * types (`validateRuleChain`) is in `validate.ts`: this module stays free of the node registry,
 * so that node types can use its types.
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
    /** RuleGo's switch: true turns the agent off (no chat, no cron, not in `/models`); absent means enabled. */
    disabled: Type.Optional(Type.Boolean()),
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

const RuleMetadata = Type.Object({
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

export const AGENT_NODE_TYPE = 'ai/agent';

/** Does the chain have an `ai/agent` node? */
export function isAgentChain(dsl: RuleChainDsl): boolean {
  return dsl.metadata.nodes.some((n) => n.type === AGENT_NODE_TYPE);
}

/** `ruleChain.additionalInfo.category` when it is a string. */
export function chainCategory(dsl: RuleChainDsl): string | null {
  const category = dsl.ruleChain.additionalInfo?.category;
  return typeof category === 'string' ? category : null;
}

/** A word of advice for a field a closed schema does not know at `path` (`configuration.tools[0]`). */
export type UnknownFieldHint = (path: string, key: string) => string | undefined;

/** TypeBox errors as `path: message` lines, `path` in dotted form (`metadata.nodes[1].id`). */
export function schemaErrors(schema: TSchema, value: unknown, root = '', hint?: UnknownFieldHint): string[] {
  const out: string[] = [];
  for (const e of Value.Errors(schema, value)) {
    if (e.keyword === 'boolean') continue; // repeats an additionalProperties error
    const path = pointerToPath(root, e.instancePath);
    if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperties?: string[] }).additionalProperties ?? [];
      for (const key of extra) {
        const more = hint?.(path, key);
        out.push(`${path ? `${path}: ` : ''}unknown field "${key}"${more ? ` (${more})` : ''}`);
      }
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
