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
 * The built-in tools, by name: each spec of `builtinToolSpecs` (`@agentry/definitions`) with
 * what it does when it runs.
 */
export const builtinTools: Readonly<Record<string, BuiltinTool>> = Object.freeze(
  Object.fromEntries([readTool, writeTool, editTool, grepTool, globTool, skillTool, cronTool, sendMessageTool, httpFetchTool, bashTool].map((t) => [t.name, t])),
);
