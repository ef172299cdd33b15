import Type, { type Static } from 'typebox';
import { Closed, PageOf, ResourceId, SuccessBody } from './common.js';
import { AgentAudience } from '../audience.js';

/**
 * Agents and rule chains as the gateway answers them. RuleGo's DSL is open: editors add layout
 * data and other keys at every level, and the gateway stores and returns them as they came, so
 * every object here keeps keys it does not name (`additionalProperties: true`; serializing with a
 * closed schema would drop them). Secrets inside are the marker, never the value.
 */

const Open = { additionalProperties: true } as const;
const FreeForm = Type.Record(Type.String(), Type.Unknown());

export const RuleChainInfo = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    root: Type.Optional(Type.Boolean()),
    debugMode: Type.Optional(Type.Boolean()),
    /** RuleGo's switch: true turns the agent off; absent means enabled. */
    disabled: Type.Optional(Type.Boolean()),
    additionalInfo: Type.Optional(FreeForm),
    configuration: Type.Optional(FreeForm),
  },
  Open,
);

export const RuleNodeDocument = Type.Object(
  {
    id: Type.String(),
    type: Type.String(),
    name: Type.Optional(Type.String()),
    debugMode: Type.Optional(Type.Boolean()),
    additionalInfo: Type.Optional(FreeForm),
    configuration: Type.Optional(FreeForm),
  },
  Open,
);

export const RuleConnectionDocument = Type.Object({ fromId: Type.String(), toId: Type.String(), type: Type.String() }, Open);

export const RuleMetadataDocument = Type.Object(
  { firstNodeIndex: Type.Optional(Type.Integer()), nodes: Type.Array(RuleNodeDocument), connections: Type.Array(RuleConnectionDocument) },
  Open,
);

/** An agent or a rule chain in RuleGo's DSL (`GET /agents/{id}`, `GET /rules/{id}`, creates, updates). */
export const RuleChainDocument = Type.Object({ ruleChain: RuleChainInfo, metadata: RuleMetadataDocument }, Open);
export type RuleChainDocument = Static<typeof RuleChainDocument>;

/**
 * The spec's list item: `{ruleChain: {id, name}}`, plus `disabled: true` only for an agent that
 * is switched off (so the list can say so without a request per agent), and the username that
 * owns it (only its owner or an admin may change it), and, to its owner and admins only, who
 * else may chat with it (`audience`).
 */
export const AgentListItem = Type.Object({
  ruleChain: Type.Object({
    id: Type.String(),
    name: Type.String(),
    disabled: Type.Optional(Type.Boolean()),
    owner: Type.Optional(Type.String()),
    audience: Type.Optional(AgentAudience),
  }),
});
export type AgentListItem = Static<typeof AgentListItem>;

export const AgentList = PageOf(AgentListItem);
export type AgentList = Static<typeof AgentList>;

export const WorkspaceSeedFile = Type.Object({ path: Type.String(), content: Type.String() });
export type WorkspaceSeedFile = Static<typeof WorkspaceSeedFile>;

/** `GET /agent-template`: a valid agent DSL plus the files a new agent's workspace gets. */
export const AgentTemplate = Type.Object(
  { ruleChain: RuleChainInfo, metadata: RuleMetadataDocument, workspaceFiles: Type.Array(WorkspaceSeedFile) },
  Open,
);
export type AgentTemplate = Static<typeof AgentTemplate>;

/** `GET /rules` item: the DSL plus where it belongs and whether this replica's engine loaded it. */
export const RuleListItem = Type.Object({
  ruleChain: RuleChainInfo,
  metadata: RuleMetadataDocument,
  kind: Type.Union([Type.Literal('agent'), Type.Literal('rule')]),
  agentId: Type.Optional(Type.String()),
  loaded: Type.Boolean(),
  error: Type.Optional(Type.String()),
  /** Node-configuration fields its node types do not name, kept as written (saved under `?fieldValidation=Warn` or `Ignore`). */
  warnings: Type.Optional(Type.Array(Type.String())),
});
export type RuleListItem = Static<typeof RuleListItem>;

/** Rule lists are arrays, not paged. */
export const RuleList = Type.Array(RuleListItem);
export type RuleList = Static<typeof RuleList>;

/**
 * `POST .../reload`: `{success: true}`, or `{success: false, message}` when the chain fails to
 * load; `warnings` lists every unknown node-configuration field the chain keeps (a save's
 * `Warning` headers show at most 20).
 */
export const ReloadResult = Type.Object({ ...SuccessBody.properties, warnings: Type.Optional(Type.Array(Type.String())) });
export type ReloadResult = Static<typeof ReloadResult>;

// Requests. The DSL bodies themselves are the definitions' (`RuleChainDsl`, `RuleChainInput`):
// what is here is everything around them.

/**
 * `?fieldValidation=` of every route that takes a chain DSL, as Kubernetes names it: what an
 * unknown node-configuration field is (`Strict` a 400, `Warn` kept and reported, `Ignore` kept).
 */
export const FieldValidationQueryFields = {
  fieldValidation: Type.Optional(
    Type.Union([Type.Literal('Strict'), Type.Literal('Warn'), Type.Literal('Ignore')], {
      description: 'unknown node-configuration fields: Strict refuses them (400), Warn (default) keeps them and reports them in Warning headers, Ignore keeps them silently',
    }),
  ),
};
/** `PUT /agents/{id}`, `POST /agents`, `PUT /rules/{id}` and the agent-level rule update. */
export const ChainWriteQuery = Type.Object(FieldValidationQueryFields);
export type ChainWriteQuery = Static<typeof ChainWriteQuery>;
/** A rule create: `?id=` names a chain whose DSL has no `ruleChain.id` (RuleGo files often have none). */
export const RuleCreateQuery = Type.Object({ id: Type.Optional(ResourceId), ...FieldValidationQueryFields });
export type RuleCreateQuery = Static<typeof RuleCreateQuery>;

/**
 * What `POST /agents` takes beside the DSL: the `workspaceFiles` of `GET /agent-template`, so
 * the template posts as it is (they are not stored: the workspace is seeded from the DSL).
 */
export const AgentCreateFields = {
  workspaceFiles: Type.Optional(Type.Array(Type.Object(WorkspaceSeedFile.properties, Closed), { maxItems: 100 })),
};

export const RuleParams = Type.Object({ id: ResourceId });
export type RuleParams = Static<typeof RuleParams>;
export const AgentRuleParams = Type.Object({ agentId: ResourceId, id: ResourceId });
export type AgentRuleParams = Static<typeof AgentRuleParams>;

const RuleFilterFields = {
  category: Type.Optional(Type.String({ maxLength: 200 })),
  /** true: only chains that loaded; false: only chains that failed to load. */
  loaded: Type.Optional(Type.Boolean()),
};
/** `GET /agents/{agentId}/rules` */
export const AgentRuleListQuery = Type.Object(RuleFilterFields);
export type AgentRuleListQuery = Static<typeof AgentRuleListQuery>;
/** `GET /rules`: the agent-level filters, and `agentId` to list one agent's chains. */
export const RuleListQuery = Type.Object({ agentId: Type.Optional(ResourceId), ...RuleFilterFields });
export type RuleListQuery = Static<typeof RuleListQuery>;
