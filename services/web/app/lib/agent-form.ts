import { fieldForPath, type FieldHint, type JsonSchema } from './schema-form';

/**
 * The agent editor's side of the generated form (pages/Agents.tsx): what it adds to the `ai/agent`
 * schema of `GET /tools/forms`, how the gateway's 400 is split into problems and which field each
 * lands at, and how the `tools` list splits into the built-in checkboxes and everything else.
 */

/**
 * The keys of `params` the agent worker reads (services/agent-worker `modelParams`: `temperature`,
 * `topP`, `maxTokens`, `stop`; the snake_case spellings also work). The engine declares `params`
 * as an open record (its description names them), so the form would otherwise offer only JSON.
 * Ranges are the OpenAI API's, as the gateway's chat route checks them; a property the server's
 * schema does declare replaces the one here.
 */
export const KNOWN_PARAMS: Record<string, JsonSchema> = {
  temperature: { type: 'number', minimum: 0, maximum: 2, title: 'Temperature' },
  topP: { type: 'number', minimum: 0, maximum: 1, title: 'Top p', description: 'nucleus sampling' },
  maxTokens: { type: 'integer', minimum: 1, title: 'Max tokens per model call' },
  stop: { type: 'array', items: { type: 'string' }, title: 'Stop sequences' },
};

/** The `ai/agent` configuration schema with `params`' known keys spelled out. */
export function agentConfigSchema(configuration: JsonSchema): JsonSchema {
  const params = configuration.properties?.params;
  if (!params) return configuration;
  return {
    ...configuration,
    properties: { ...configuration.properties, params: { ...params, properties: { ...KNOWN_PARAMS, ...params.properties } } },
  };
}

/**
 * Labels and help the schema lacks (it has no titles). Kept to what a property name cannot say;
 * the schema's own title and description win when it gets them.
 */
export const AGENT_FIELD_HINTS: Record<string, FieldHint> = {
  systemPrompt: { hint: '`${include(path)}` inserts a workspace file, `${now()}` the time.', rows: 8 },
  params: { label: 'Model parameters' },
  maxStep: { label: 'Max steps (model calls per answer)' },
  maxToolOutputLength: { label: 'Max tool output (characters)' },
  failover: { hint: 'Tried in order when the provider fails.' },
  disabledSkills: { hint: 'Skills this agent does not see.' },
  clientTools: { label: "Accept the client's tools", hint: 'Off: an OpenAI request that brings its own function tools is refused (400).' },
  heartbeat: {
    hint: 'A self-prompt the scheduler sends every interval within the active hours. An answer of only HEARTBEAT_OK sends and keeps nothing; anything else goes to the target and stays in the heartbeat session.',
  },
  'heartbeat.interval': { placeholder: '30m' },
  'heartbeat.prompt': { multiline: true, rows: 3, placeholder: '(default: asks for HEARTBEAT_OK when nothing needs attention)' },
  'heartbeat.activeHours': { label: 'Active hours' },
  'heartbeat.activeHours.start': { placeholder: '09:00' },
  'heartbeat.activeHours.end': { placeholder: '22:00' },
  'heartbeat.timezone': { label: 'Time zone', placeholder: 'UTC', suggestions: ['UTC', 'Europe/Berlin', 'Europe/London', 'America/New_York', 'Asia/Tokyo'].map((value) => ({ value })) },
  'heartbeat.target': { placeholder: 'chat_d:account:chatId' },
};

/**
 * A 400's message split into its problems. The gateway joins them with `; `, but a problem may
 * contain `; ` itself (`tools[0].timeout is in milliseconds; 5 ms is too short`), so a piece only
 * starts a new problem when it starts with a path (`metadata.nodes[0] ("a"), ...`, `ruleChain.name:`).
 */
export function splitProblems(message: string): string[] {
  return message.split(/; (?=\(root\)|[A-Za-z_$][\w$]*(?:\[\d+\]|\.[A-Za-z_$][\w$]*)*(?: \("[^"]*"\))?[,:])/);
}

const CONFIG_PROBLEM = /configuration\.([A-Za-z_$][\w$]*(?:\[\d+\]|\.[A-Za-z_$][\w$]*)*)(:\s*|\s+)(.*)$/s;

export interface FieldErrors {
  /** By the id (dotted path) of a field of the `ai/agent` configuration form. */
  fields: Record<string, string>;
  /** `ruleChain.name` problems. */
  name: string | null;
  /** Everything else, as the server wrote it. */
  other: string[];
}

/**
 * Field errors from a 400's message (`metadata.nodes[0] ("a"), ai/agent: configuration.maxStep:
 * must be >= 1; ...`): a problem of the agent node lands at the deepest field of `fieldIds` its
 * path leads to, as the bare message when the path is the field's own (`must be >= 1`) and with
 * its path when it is deeper (`failover[0].model: must be string`).
 */
export function fieldErrorsOf(message: string, agentNodeId: string | undefined, fieldIds: string[]): FieldErrors {
  const out: FieldErrors = { fields: {}, name: null, other: [] };
  for (const problem of splitProblems(message)) {
    const inNode = agentNodeId !== undefined && problem.includes(`("${agentNodeId}")`);
    const m = inNode ? CONFIG_PROBLEM.exec(problem) : null;
    const field = m ? fieldForPath(m[1]!, fieldIds) : undefined;
    if (m && field) {
      const [, path, sep, text] = m as unknown as [string, string, string, string];
      const shown = path === field && sep.startsWith(':') ? text : sep.startsWith(':') ? `${path}: ${text}` : `${path} ${text}`;
      out.fields[field] = out.fields[field] ? `${out.fields[field]}; ${shown}` : shown;
    } else if (/^ruleChain\.name\b/.test(problem)) {
      out.name = problem.replace(/^ruleChain\.name:\s*/, '');
    } else out.other.push(problem);
  }
  return out;
}

export type ToolEntry = Record<string, unknown>;

/** A tool entry the checkboxes stand for: a built-in tool (`type` absent or `builtin`) the server lists. */
export function isCheckboxTool(entry: ToolEntry, builtinNames: readonly string[]): boolean {
  return (entry.type ?? 'builtin') === 'builtin' && typeof entry.name === 'string' && builtinNames.includes(entry.name);
}

/** `tools` with the built-in `name` on or off; an entry that is on keeps its settings (`config`, `timeout`). */
export function toggleBuiltin(tools: ToolEntry[], name: string, on: boolean): ToolEntry[] {
  const isIt = (t: ToolEntry) => (t.type ?? 'builtin') === 'builtin' && t.name === name;
  if (on) return tools.some(isIt) ? tools : [...tools, { type: 'builtin', name }];
  return tools.filter((t) => !isIt(t));
}

/** `tools` with the entries the checkboxes do not stand for replaced by `others` (checkbox entries keep their place). */
export function withOtherTools(tools: ToolEntry[], builtinNames: readonly string[], others: ToolEntry[]): ToolEntry[] {
  return [...tools.filter((t) => isCheckboxTool(t, builtinNames)), ...others];
}
