import { bashTool } from './bash.js';
import type { BuiltinTool } from './common.js';
import { cronTool } from './cron.js';
import { editTool } from './edit.js';
import { globTool } from './glob.js';
import { grepTool } from './grep.js';
import { httpFetchTool } from './http-fetch.js';
import { readTool } from './read.js';
import { sendMessageTool } from './send-message.js';
import { skillTool } from './skill.js';
import { writeTool } from './write.js';

export type { BuiltinTool } from './common.js';
export { BASH_DENY_LIST, bwrapUnavailable } from './bash.js';
export { htmlToText } from './http-fetch.js';

/**
 * The built-in tools, by name. Agents list the ones they use in their `ai/agent` node's
 * `tools` (`{type: 'builtin', name, config?}`); `optIn` ones (bash, http_fetch, send_message) are never part
 * of the defaults.
 */
export const builtinTools: Readonly<Record<string, BuiltinTool>> = Object.freeze(
  Object.fromEntries([readTool, writeTool, editTool, grepTool, globTool, skillTool, cronTool, sendMessageTool, httpFetchTool, bashTool].map((t) => [t.name, t])),
);

/** Names of the built-in tools an agent gets by default (every one that is not opt-in). */
export function defaultBuiltinToolNames(): string[] {
  return Object.values(builtinTools)
    .filter((t) => !t.optIn)
    .map((t) => t.name);
}
