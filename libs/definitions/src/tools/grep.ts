import Type from 'typebox';
import { StringEnum } from './schema.js';
import { defineToolSpec } from './types.js';

const Context = (what: string) => Type.Optional(Type.Integer({ minimum: 0, maximum: 50, description: `content mode: lines of context ${what} each match` }));

const Parameters = Type.Object(
  {
    pattern: Type.String({ minLength: 1, description: 'JavaScript regular expression, matched against each line (e.g. "TODO|FIXME", "function\\s+\\w+")' }),
    path: Type.Optional(Type.String({ description: 'file or directory to search, relative to the workspace root (default: the whole workspace)' })),
    include: Type.Optional(Type.String({ minLength: 1, description: 'only files matching this glob; without "/" it matches file names at any depth (e.g. "*.md", "docs/**/*.txt")' })),
    exclude: Type.Optional(Type.String({ minLength: 1, description: 'skip files matching this glob (same rules as include)' })),
    output_mode: Type.Optional(
      StringEnum(['content', 'files_with_matches', 'count'], {
        description: 'content (default): matching lines as path:line:text; files_with_matches: only the paths; count: matches per file',
      }),
    ),
    '-A': Context('after'),
    '-B': Context('before'),
    '-C': Context('before and after'),
    '-i': Type.Optional(Type.Boolean({ description: 'case-insensitive (default false)' })),
    head_limit: Type.Optional(Type.Integer({ minimum: 1, description: 'most results to return: matching lines, files or counts (default 100)' })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxResults: Type.Optional(Type.Integer({ minimum: 1, description: 'results when head_limit is not given (default 100)' })),
  hardMaxLimit: Type.Optional(Type.Integer({ minimum: 1, description: 'largest head_limit honoured (default 1000)' })),
  maxFiles: Type.Optional(Type.Integer({ minimum: 1, description: 'most files searched in one call (default 5000)' })),
  maxFileBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'larger files are skipped (default 2097152)' })),
  maxScanBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'most bytes searched in one call (default 33554432)' })),
  regexTimeoutMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000, description: 'longest the pattern may run (default 5000)' })),
});

/** The `grep` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const grepSpec = defineToolSpec({
  name: 'grep',
  description:
    'Search the contents of workspace files with a regular expression, line by line. Returns matching lines as path:line:text ' +
    '(context lines as path-line-text) with -A/-B/-C for context, or only file paths (output_mode "files_with_matches") or counts ("count"). ' +
    'Narrow with path, include and exclude. Binary files are skipped.',
  parameters: Parameters,
  configSchema: Config,
});
