import Type from 'typebox';
import { StringEnum } from './schema.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    operation: Type.Optional(StringEnum(['file'], { description: 'always "file" (may be left out)' })),
    path: Type.String({ minLength: 1, description: 'the file, relative to the workspace root; missing directories are created' }),
    content: Type.String({ description: 'the text to write' }),
    mode: Type.Optional(
      StringEnum(['create', 'overwrite', 'append'], {
        description: 'create (default): a new file, fails if it exists; overwrite: replace the file (or create it); append: add to the end (or create it)',
      }),
    ),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  maxFileSize: Type.Optional(Type.Integer({ minimum: 1, description: 'largest file in bytes (default and ceiling: workspace.max_file_bytes)' })),
});

/** The `write` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const writeSpec = defineToolSpec({
  name: 'write',
  description:
    'Write a text file in the agent workspace. mode "create" (the default) makes a new file and fails when it exists; ' +
    '"overwrite" replaces the whole file; "append" adds content at its end. Directories above the file are created. ' +
    'To change part of an existing file use the edit tool instead.',
  parameters: Parameters,
  configSchema: Config,
});
