import Type from 'typebox';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    pattern: Type.String({
      minLength: 1,
      description: 'glob relative to path: * and ? stay within a directory, ** spans directories, {a,b} alternatives (e.g. "**/*.md", "notes/*.txt")',
    }),
    path: Type.Optional(Type.String({ description: 'directory to search from, relative to the workspace root (default: the root)' })),
    head_limit: Type.Optional(Type.Integer({ minimum: 1, description: 'most paths to return (default 200)' })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxResults: Type.Optional(Type.Integer({ minimum: 1, description: 'paths returned when head_limit is not given (default 200)' })),
  hardMaxLimit: Type.Optional(Type.Integer({ minimum: 1, description: 'largest head_limit honoured (default 1000)' })),
});

/** The `glob` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const globSpec = defineToolSpec({
  name: 'glob',
  description:
    'Find files in the agent workspace by name pattern. "*.md" matches only directly inside path; "**/*.md" matches at any depth. ' +
    'Returns matching file paths relative to the workspace root, one per line, sorted by path.',
  parameters: Parameters,
  configSchema: Config,
});
