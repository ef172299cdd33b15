import Type, { type Static } from 'typebox';
import { Closed, IsoDate, PageOf, PageQueryFields, ResourceId, type Page } from './common.js';

/** Skills, global and agent-private (spec "Skill", "Global skills", "Agent-private skills"). */

export const SkillScope = Type.Union([Type.Literal('global'), Type.Literal('local')]);
export type SkillScope = Static<typeof SkillScope>;

export const SkillStatus = Type.Union([Type.Literal('active'), Type.Literal('draft')]);
export type SkillStatus = Static<typeof SkillStatus>;

/** A skill; lists leave `content` out (it can be large), `agentId` is there for local skills. */
export const Skill = Type.Object({
  name: Type.String(),
  description: Type.String(),
  content: Type.Optional(Type.String()),
  scope: SkillScope,
  agentId: Type.Optional(Type.String()),
  status: SkillStatus,
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type Skill = Static<typeof Skill>;

export const SkillPage = PageOf(Skill);
export type SkillPage = Page<Skill>;

/** An archive upload: names written, and the archive entries that were not skills (and why). */
export const SkillUploadResult = Type.Object({
  created: Type.Array(Type.String()),
  updated: Type.Array(Type.String()),
  skipped: Type.Array(Type.Object({ entry: Type.String(), reason: Type.String() })),
});
export type SkillUploadResult = Static<typeof SkillUploadResult>;

// Requests.

/** The largest skill body kept, in bytes (UTF-8): the route's limit and the skill format's. */
export const MAX_SKILL_BYTES = 1024 * 1024;

/** Skill names follow the id rule: letters, digits, `_` and `-`, 1 to 64 of them. */
export const SkillName = ResourceId;
const SkillContent = Type.String({ maxLength: MAX_SKILL_BYTES });
const SkillDescription = Type.String({ maxLength: 4096 });

const SkillChangeFields = {
  description: Type.Optional(SkillDescription),
  content: Type.Optional(SkillContent),
  status: Type.Optional(SkillStatus),
};
const NewSkillFields = { name: SkillName, description: Type.Optional(SkillDescription), content: SkillContent, status: Type.Optional(SkillStatus) };
/** Which skill a global route means: `scope` (default global) and, for local, `agentId`. */
const SkillSelectorFields = { scope: Type.Optional(SkillScope), agentId: Type.Optional(ResourceId) };

export const SkillParams = Type.Object({ name: SkillName });
export type SkillParams = Static<typeof SkillParams>;
export const AgentSkillParams = Type.Object({ agentId: ResourceId, name: SkillName });
export type AgentSkillParams = Static<typeof AgentSkillParams>;

export const SkillListQuery = Type.Object({
  ...PageQueryFields,
  scope: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('global'), Type.Literal('local')])),
  agentId: Type.Optional(ResourceId),
});
export type SkillListQuery = Static<typeof SkillListQuery>;
export const SkillSelectorQuery = Type.Object(SkillSelectorFields);
export type SkillSelectorQuery = Static<typeof SkillSelectorQuery>;

// Closed: a body field the route does not name is a 400 naming it, not stored and ignored.
export const AgentSkillCreateBody = Type.Object(NewSkillFields, Closed);
export type AgentSkillCreateBody = Static<typeof AgentSkillCreateBody>;
export const AgentSkillUpdateBody = Type.Object(SkillChangeFields, Closed);
export type AgentSkillUpdateBody = Static<typeof AgentSkillUpdateBody>;
export const SkillCreateBody = Type.Object({ ...NewSkillFields, ...SkillSelectorFields }, Closed);
export type SkillCreateBody = Static<typeof SkillCreateBody>;
export const SkillUpdateBody = Type.Object({ ...SkillChangeFields, ...SkillSelectorFields }, Closed);
export type SkillUpdateBody = Static<typeof SkillUpdateBody>;
export const SkillCopyBody = Type.Object(
  {
    name: SkillName,
    targetScope: SkillScope,
    newName: Type.Optional(SkillName),
    /** The agent on the local side: the target for targetScope local, the source for global; none copies global -> global. */
    agentId: Type.Optional(ResourceId),
  },
  Closed,
);
export type SkillCopyBody = Static<typeof SkillCopyBody>;

/** The `file` part of an upload: a zip of skill folders (each with a SKILL.md), at most 50 MB. */
const ArchivePart = Type.String({ format: 'binary', description: 'a zip archive of skills (folders with a SKILL.md), at most 50 MB' });
// Multipart bodies are read as a stream by the route: these describe them, nothing validates with them.
/** `POST /agents/{agentId}/skills/upload` (multipart/form-data). */
export const AgentSkillUploadForm = Type.Object({ file: ArchivePart });
/** `POST /skills/upload` (multipart/form-data). */
export const SkillUploadForm = Type.Object({
  file: ArchivePart,
  scope: Type.Optional(SkillScope),
  agentId: Type.Optional(Type.String({ description: 'the agent whose local skills receive the archive (scope local)' })),
});
