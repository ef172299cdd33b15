import Type, { type Static } from 'typebox';
import { IsoDate, PageOf, type Page } from './common.js';

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
