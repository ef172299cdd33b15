import Type, { type Static } from 'typebox';
import { IsoDate } from './common.js';

/** An agent's workspace files (spec "Workspace entry", "Agent workspace"). */

/** A listed entry: `size` and `modTime` are there for files only. */
export const WorkspaceEntry = Type.Object({
  name: Type.String(),
  isDir: Type.Boolean(),
  size: Type.Optional(Type.Integer()),
  modTime: Type.Optional(IsoDate),
});
export type WorkspaceEntry = Static<typeof WorkspaceEntry>;

export const WorkspaceEntryList = Type.Array(WorkspaceEntry);
export type WorkspaceEntryList = Static<typeof WorkspaceEntryList>;

/** A written entry (create, overwrite, mkdir, rename): the listed fields plus its normalised path. */
export const WorkspaceWritten = Type.Object({
  path: Type.String(),
  name: Type.String(),
  isDir: Type.Boolean(),
  size: Type.Optional(Type.Integer()),
  modTime: Type.Optional(IsoDate),
});
export type WorkspaceWritten = Static<typeof WorkspaceWritten>;

/** A file's content: text as it is; bytes that are not UTF-8 as base64, flagged so nothing is mangled. */
export const WorkspaceFile = Type.Object({
  content: Type.String(),
  encoding: Type.Optional(Type.Literal('base64')),
});
export type WorkspaceFile = Static<typeof WorkspaceFile>;
