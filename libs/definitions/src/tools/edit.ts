import Type from 'typebox';
import { StringEnum } from './schema.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    path: Type.String({ minLength: 1, description: 'the file to change, relative to the workspace root' }),
    operation: Type.Optional(
      StringEnum(['search', 'line', 'insert', 'delete'], {
        description:
          'search (the default): replace the text `search` with `replace`; line: replace line `line_number` with `new_content`; ' +
          'insert: insert `new_content` after line `insert_after` (0 = at the top) or before line `insert_before`; delete: remove the lines in `delete_lines`',
      }),
    ),
    search: Type.Optional(
      Type.String({ minLength: 1, description: 'search: the exact text to find, whitespace and indentation included (a regex with use_regex)' }),
    ),
    replace: Type.Optional(Type.String({ description: 'search: the replacement (default ""); with use_regex, $1 and $<name> refer to groups' })),
    global: Type.Optional(Type.Boolean({ description: 'search: replace every occurrence (default false: the text must occur exactly once)' })),
    use_regex: Type.Optional(Type.Boolean({ description: 'search: treat `search` as a JavaScript regular expression (default false)' })),
    line_number: Type.Optional(Type.Integer({ minimum: 1, description: 'line: the line to replace, 1-based' })),
    new_content: Type.Optional(Type.String({ description: 'line and insert: the new text; may hold several lines' })),
    insert_after: Type.Optional(Type.Integer({ minimum: 0, description: 'insert: the line after which to insert (0 = before the first line)' })),
    insert_before: Type.Optional(Type.Integer({ minimum: 1, description: 'insert: the line before which to insert' })),
    delete_lines: Type.Optional(Type.Array(Type.Integer({ minimum: 1 }), { minItems: 1, description: 'delete: the line numbers to remove' })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxFileSize: Type.Optional(Type.Integer({ minimum: 1, description: 'largest file in bytes after the edit (default and ceiling: workspace.max_file_bytes)' })),
  regexTimeoutMs: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000, description: 'longest a use_regex search may run (default 2000)' })),
});

/** The `edit` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const editSpec = defineToolSpec({
  name: 'edit',
  description:
    'Change part of an existing text file in the agent workspace. operation "search" (the default) replaces `search` with `replace`: ' +
    'the text must match exactly and occur once unless global is true (use_regex for a regular expression). ' +
    'Line operations use the 1-based line numbers the read tool shows: "line" replaces one line, "insert" adds lines, "delete" removes lines. ' +
    'To replace a whole file use the write tool.',
  parameters: Parameters,
  configSchema: Config,
});
