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

/** `ruleChain`; `info` is how `additionalInfo` and `configuration` are checked (the written form also takes null). */
function ruleChainInfo<T extends TSchema, I extends TSchema = typeof Info>(id: T, info: I = Info as unknown as I) {
  return Type.Object({
    id,
    name: Type.String({ minLength: 1, maxLength: 200 }),
    root: Type.Optional(Type.Boolean()),
    debugMode: Type.Optional(Type.Boolean()),
    /** RuleGo's switch: true turns the agent off (no chat, no cron, not in `/models`); absent means enabled. */
    disabled: Type.Optional(Type.Boolean()),
    /** `category` (the `GET /rules?category=` filter), `description`, `icon`, ... */
    additionalInfo: Type.Optional(info),
    configuration: Type.Optional(info),
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

/*
 * The DSL as people write it (RuleGo's files, TpClaw exports): ids may be missing, `null`
 * stands for an empty `configuration`/`additionalInfo` (Go writes a nil map as null) and for
 * empty `nodes`/`connections` (a nil slice). Routes take this shape and `normalizeRuleChain`
 * turns it into a `RuleChainDsl`; what is stored is always the strict shape.
 */
const NullableInfo = Type.Union([Info, Type.Null()]);

const RuleNodeInput = Type.Object({
  id: Type.Optional(Id),
  type: Type.String({ minLength: 1, maxLength: 100 }),
  name: Type.Optional(Type.String({ maxLength: 200 })),
  debugMode: Type.Optional(Type.Boolean()),
  additionalInfo: Type.Optional(NullableInfo),
  configuration: Type.Optional(NullableInfo),
});

function ruleChainInput<T extends TSchema>(id: T) {
  return Type.Object(
    {
      ruleChain: ruleChainInfo(id, NullableInfo),
      metadata: Type.Object({
        firstNodeIndex: Type.Optional(Type.Integer({ minimum: 0 })),
        nodes: Type.Union([Type.Array(RuleNodeInput, { maxItems: 1000 }), Type.Null()]),
        connections: Type.Optional(Type.Union([Type.Array(RuleConnection, { maxItems: 5000 }), Type.Null()])),
      }),
    },
    { additionalProperties: false },
  );
}

/** `POST` bodies as written: the chain's id may come from elsewhere (the URL) or be generated. */
export const RuleChainInput = ruleChainInput(Type.Optional(Id));
export type RuleChainInput = Static<typeof RuleChainInput>;

/** What `normalizeRuleChain` did besides copying: one line per id it had to choose. */
export interface NormalizedChain {
  dsl: RuleChainDsl;
  /** `ruleChain.id = "x" (generated)`, `metadata.nodes[0].id = "node0"`, ... */
  generated: string[];
}

/** Where a chain's id comes from besides the body. */
export interface ChainIdSource {
  /** The URL's id. */
  id?: string | undefined;
  /**
   * The URL's id wins over the body's, as RuleGo's `New(id, dsl)` registers a chain under the
   * id it is given whatever `ruleChain.id` says (an import names the chain). A PUT's path only
   * fills a missing id: a different one there is a mistake the caller must hear about.
   */
  overrides?: boolean;
  generate: () => string;
}

/**
 * The strict DSL of a chain written the RuleGo way: the chain id from the body or the URL (see
 * ChainIdSource), else `generate()`; a node without an id is `node<index>` as RuleGo names it;
 * `null` configurations and infos become `{}`, null lists `[]`. Every other field, unknown ones
 * included, is kept as written and in its place.
 */
export function normalizeRuleChain(input: RuleChainInput, source: ChainIdSource): NormalizedChain {
  const generated: string[] = [];
  const written = input.ruleChain.id;
  const chainId = (source.overrides ? (source.id ?? written) : (written ?? source.id)) ?? source.generate();
  if (written === undefined) generated.push(`ruleChain.id = "${chainId}"${source.id === undefined ? ' (generated)' : ' (from the URL)'}`);
  else if (written !== chainId) generated.push(`ruleChain.id = "${chainId}" (from the URL, in place of "${written}")`);
  const ruleChain = { ...emptyForNull(input.ruleChain), id: chainId };
  const nodes = (input.metadata.nodes ?? []).map((node, index) => {
    if (node.id !== undefined) return emptyForNull(node);
    generated.push(`metadata.nodes[${index}].id = "node${index}"`);
    return { id: `node${index}`, ...emptyForNull(node) };
  });
  const metadata = { ...input.metadata, nodes, connections: input.metadata.connections ?? [] };
  return { dsl: { ruleChain, metadata } as RuleChainDsl, generated };
}

function emptyForNull<T extends { configuration?: unknown; additionalInfo?: unknown }>(obj: T): T {
  const out = { ...obj };
  if (out.configuration === null) out.configuration = {};
  if (out.additionalInfo === null) out.additionalInfo = {};
  return out;
}

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

/** One problem TypeBox found; `unknownField` marks a key a closed object does not name. */
export interface SchemaProblem {
  text: string;
  unknownField: boolean;
}

/** TypeBox errors as `path: message` lines, `path` in dotted form (`metadata.nodes[1].id`). */
export function schemaErrors(schema: TSchema, value: unknown, root = '', hint?: UnknownFieldHint): string[] {
  return schemaProblems(schema, value, root, hint).map((p) => p.text);
}

/**
 * As `schemaErrors`, each line marked when it is an unknown field: field validation
 * (`?fieldValidation=`) refuses those, reports them or lets them be, while every other problem
 * is always an error.
 */
export function schemaProblems(schema: TSchema, value: unknown, root = '', hint?: UnknownFieldHint): SchemaProblem[] {
  const out = new Map<string, SchemaProblem>();
  const add = (text: string, unknownField: boolean) => {
    if (!out.has(text)) out.set(text, { text, unknownField });
  };
  for (const e of Value.Errors(schema, value)) {
    if (e.keyword === 'boolean') continue; // repeats an additionalProperties error
    const path = pointerToPath(root, e.instancePath);
    if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperties?: string[] }).additionalProperties ?? [];
      for (const key of extra) {
        const more = hint?.(path, key);
        add(`${path ? `${path}: ` : ''}unknown field "${key}"${more ? ` (${more})` : ''}`, true);
      }
      continue;
    }
    add(`${path || '(root)'}: ${e.message}`, false);
  }
  return [...out.values()];
}

function pointerToPath(root: string, pointer: string): string {
  let path = root;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += /^\d+$/.test(part) ? `[${part}]` : path ? `.${part}` : part;
  }
  return path;
}
