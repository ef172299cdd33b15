import Type from 'typebox';
import { StringEnum } from './schema.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    operation: Type.Optional(
      StringEnum(['file', 'list', 'search'], {
        description: 'file (default): read a file, optionally a line range; list: the entries of a directory; search: find text in files',
      }),
    ),
    path: Type.Optional(
      Type.String({ description: 'Relative to the workspace root. file: the file (required); list and search: the directory (default: the root)' }),
    ),
    line_from: Type.Optional(Type.Integer({ minimum: 1, description: 'file: first line to read, 1-based (default 1)' })),
    line_to: Type.Optional(Type.Integer({ minimum: 1, description: 'file: last line to read, inclusive (default: as many as the limit allows)' })),
    query: Type.Optional(Type.String({ minLength: 1, description: 'search: the text to find (case-insensitive, plain text, not a regex)' })),
    pattern: Type.Optional(
      Type.String({ minLength: 1, description: 'search: which files to look in, a glob; without "/" it matches file names at any depth (default "*.md")' }),
    ),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxReadLines: Type.Optional(Type.Integer({ minimum: 1, description: 'most lines one read returns (default 1000)' })),
  maxReadChars: Type.Optional(Type.Integer({ minimum: 1000, description: 'most characters one read returns (default 100000)' })),
  maxSearchResults: Type.Optional(Type.Integer({ minimum: 1, description: 'most matching lines a search returns (default 30)' })),
  maxListEntries: Type.Optional(Type.Integer({ minimum: 1, description: 'most entries a list returns (default 500)' })),
});

/** The `read` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const readSpec = defineToolSpec({
  name: 'read',
  description:
    'Read the agent workspace. operation "file" (the default) returns a file with line numbers; use line_from/line_to for long files. ' +
    'operation "list" shows the entries of a directory. operation "search" finds lines containing query (plain text, case-insensitive) ' +
    'in files matching pattern (default "*.md"). Paths are relative to the workspace root.',
  parameters: Parameters,
  configSchema: Config,
});
