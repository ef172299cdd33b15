import Type from 'typebox';
import { AUTHORITY } from '../authority/policy.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    command: Type.String({ minLength: 1, maxLength: 32_000, description: 'the bash command line to run (bash -c); the working directory is a copy of your workspace' }),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, description: 'seconds before the command is killed (default 30)' })),
  maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1024, description: 'bytes kept of stdout and of stderr each (default 65536)' })),
  denyList: Type.Optional(Type.Array(Type.String(), { description: 'extra regular expressions; a command matching one is refused' })),
  denyListTimeoutMs: Type.Optional(
    Type.Integer({ minimum: 10, maximum: 60_000, description: 'longest the denyList patterns may run on one command; longer refuses the command (default 1000)' }),
  ),
  path: Type.Optional(Type.String({ description: 'PATH of the command (default /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)' })),
  maxWorkspaceBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'largest workspace copied to the scratch directory (default 104857600)' })),
  maxFileSize: Type.Optional(Type.Integer({ minimum: 1, description: 'larger files are not written back (default and ceiling: workspace.max_file_bytes)' })),
  maxSyncBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'most bytes written back per call (default 104857600)' })),
  sandbox: Type.Optional(
    Type.Union([Type.Literal('auto'), Type.Literal('bwrap'), Type.Literal('none')], {
      description: 'auto (default): bubblewrap where it works, else refused unless security.allowUnsandboxedBash (then unsandboxed with a warning); bwrap: refuse to run without it; none: never sandbox (needs security.allowUnsandboxedBash)',
      ...AUTHORITY,
    }),
  ),
  allowNetwork: Type.Optional(Type.Boolean({ description: 'let a sandboxed command use the network (default false; admin-only, like allowPrivateNetworks)', ...AUTHORITY })),
});

/** The `bash` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const bashSpec = defineToolSpec({
  name: 'bash',
  description:
    'Run a bash command line. The working directory is a fresh copy of your workspace; when the command ends, files it created, ' +
    'changed or deleted there are saved back to the workspace. Returns JSON {success, exitCode, stdout, stderr, timedOut, written, deleted}. ' +
    'Commands are killed after a timeout (30 s unless configured) and long output is cut. Destructive system commands are refused.',
  parameters: Parameters,
  configSchema: Config,
  optIn: true,
});
