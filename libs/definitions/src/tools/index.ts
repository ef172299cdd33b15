import { bashSpec } from './bash.js';
import { cronSpec } from './cron.js';
import { editSpec } from './edit.js';
import { globSpec } from './glob.js';
import { grepSpec } from './grep.js';
import { httpFetchSpec } from './http-fetch.js';
import { readSpec } from './read.js';
import { sendMessageSpec } from './send-message.js';
import { skillSpec } from './skill.js';
import type { ToolSpec } from './types.js';
import { writeSpec } from './write.js';

export { bashSpec, cronSpec, editSpec, globSpec, grepSpec, httpFetchSpec, readSpec, sendMessageSpec, skillSpec, writeSpec };

/**
 * The built-in tools by name, as definitions name them (`{type: 'builtin', name, config?}` in an
 * `ai/agent` node's `tools`); the engine's `builtinTools` implements each of them, no more.
 * `optIn` ones (bash, http_fetch, send_message) are never part of the defaults.
 */
export const builtinToolSpecs: Readonly<Record<string, ToolSpec>> = Object.freeze(
  Object.fromEntries([readSpec, writeSpec, editSpec, grepSpec, globSpec, skillSpec, cronSpec, sendMessageSpec, httpFetchSpec, bashSpec].map((t) => [t.name, t])),
);

/** Names of the built-in tools an agent gets by default (every one that is not opt-in). */
export function defaultBuiltinToolNames(): string[] {
  return Object.values(builtinToolSpecs)
    .filter((t) => !t.optIn)
    .map((t) => t.name);
}
