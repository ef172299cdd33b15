import Type, { type Static } from 'typebox';
import { Closed, IsoDate } from './common.js';

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

// Requests. Paths are normalised and confined to the workspace by the route (400 otherwise).

export const WorkspacePathQuery = Type.Object({ path: Type.Optional(Type.String({ maxLength: 4096 })) });
export type WorkspacePathQuery = Static<typeof WorkspacePathQuery>;
const WorkspacePath = Type.String({ minLength: 1, maxLength: 4096 });
const fileFields = {
  content: Type.String(),
  /** `utf8` (default) or `base64`, for binary files sent as JSON. */
  encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
};
/** PUT /agents/{agentId}/workspace/file?path=... */
export const WorkspaceFileBody = Type.Object(fileFields, Closed);
export type WorkspaceFileBody = Static<typeof WorkspaceFileBody>;
export const WorkspaceFileCreateBody = Type.Object({ path: WorkspacePath, ...fileFields }, Closed);
export type WorkspaceFileCreateBody = Static<typeof WorkspaceFileCreateBody>;
export const WorkspaceDirCreateBody = Type.Object({ path: WorkspacePath }, Closed);
export type WorkspaceDirCreateBody = Static<typeof WorkspaceDirCreateBody>;
/** A plain name renames in place; a name with a slash is a path from the root (a move). */
export const WorkspaceRenameBody = Type.Object({ newName: WorkspacePath }, Closed);
export type WorkspaceRenameBody = Static<typeof WorkspaceRenameBody>;
