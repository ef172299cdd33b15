import { Value } from 'typebox/value';
import { ClientTool, type RunRequest, type RunToolCall, type ToolChoice } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import type { RuleChainRow } from '@agentry/db';

/**
 * The client's own function tools (issue 38), as chat completions and the Responses API take
 * them: offered to the model beside the agent's tools; a call of one ends the answer with the
 * call, and the client sends its result back in the next request.
 */

export const CLIENT_TOOLS_REFUSED = "this agent does not take the client's tools (clientTools: false): its own tools run on the server";

type ClientToolFields = Pick<RunRequest, 'clientTools' | 'toolChoice' | 'parallelToolCalls'>;

const given = (list: unknown) => list !== undefined && list !== null && !(Array.isArray(list) && list.length === 0);

/** One client tool definition, checked (a wrong one would fail the model call, later and in other words). */
function clientTool(def: ClientTool | null | undefined, where: string): ClientTool {
  if (!def || typeof def !== 'object') throw new Errors.VALIDATION(`${where} must be a function definition {name, description?, parameters?, strict?}`);
  const tool: ClientTool = {
    name: def.name,
    ...(def.description !== undefined && def.description !== null ? { description: def.description } : {}),
    ...(def.parameters !== undefined && def.parameters !== null ? { parameters: def.parameters } : {}),
    ...(def.strict !== undefined ? { strict: def.strict } : {}),
  };
  if (typeof tool.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(tool.name)) {
    throw new Errors.VALIDATION(`${where}.name must be 1 to 64 letters, digits, underscores or dashes (got ${JSON.stringify(def.name ?? null)})`);
  }
  if (!Value.Check(ClientTool, tool)) throw new Errors.VALIDATION(`${where}: description must be a string, parameters a JSON Schema object, strict a boolean`);
  return tool;
}

/** Names appear once: the model could not say which of two it meant. */
function unique(tools: ClientTool[]): ClientTool[] {
  const seen = new Set<string>();
  for (const t of tools) {
    if (seen.has(t.name)) throw new Errors.VALIDATION(`tools: the name "${t.name}" is given twice`);
    seen.add(t.name);
  }
  return tools;
}

/** `tool_choice`, checked against the tools; `none`/`auto` need none. Undefined when not given. */
function toolChoiceOf(choice: unknown, tools: ClientTool[], nameOf: (choice: Record<string, unknown>) => unknown): ToolChoice | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'none' || choice === 'auto') return choice;
  if (tools.length === 0) throw new Errors.VALIDATION('tool_choice: the request gives no tools to choose from');
  if (choice === 'required') return choice;
  const name = choice && typeof choice === 'object' && (choice as { type?: unknown }).type === 'function' ? nameOf(choice as Record<string, unknown>) : undefined;
  if (typeof name !== 'string') throw new Errors.VALIDATION('tool_choice must be "none", "auto", "required" or a function of the request\'s tools');
  if (!tools.some((t) => t.name === name)) throw new Errors.VALIDATION(`tool_choice: "${name}" is not one of the request's tools`);
  return { type: 'function', function: { name } };
}

function parallelOf(value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new Errors.VALIDATION('parallel_tool_calls must be a boolean');
  return value;
}

function fields(tools: ClientTool[], toolChoice: ToolChoice | undefined, parallel: boolean | undefined): ClientToolFields {
  return {
    ...(tools.length > 0 ? { clientTools: unique(tools) } : {}),
    ...(tools.length > 0 && toolChoice !== undefined ? { toolChoice } : {}),
    ...(tools.length > 0 && parallel !== undefined ? { parallelToolCalls: parallel } : {}),
  };
}

/** Chat completions' `tools` (function tools), `tool_choice` and `parallel_tool_calls`; the legacy `functions` are refused. */
export function chatClientTools(body: { tools?: unknown; tool_choice?: unknown; parallel_tool_calls?: unknown; functions?: unknown; function_call?: unknown }): ClientToolFields {
  if (given(body.functions) || (body.function_call !== undefined && body.function_call !== null && body.function_call !== 'none' && body.function_call !== 'auto')) {
    throw new Errors.VALIDATION('functions and function_call are deprecated by OpenAI and not supported: use tools and tool_choice');
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) throw new Errors.VALIDATION('tools must be an array of function tools');
  const tools = ((body.tools ?? []) as unknown[]).map((raw, i) => {
    const t = raw as { type?: unknown; function?: unknown } | null;
    if (!t || typeof t !== 'object' || t.type !== 'function') {
      throw new Errors.VALIDATION(`tools[${i}]: only function tools are supported (got type ${JSON.stringify(t && typeof t === 'object' ? (t.type ?? null) : null)})`);
    }
    return clientTool(t.function as ClientTool, `tools[${i}].function`);
  });
  const choice = toolChoiceOf(body.tool_choice, tools, (c) => (c.function as { name?: unknown } | undefined)?.name);
  return fields(tools, choice, parallelOf(body.parallel_tool_calls));
}

/** The Responses API's function tools (`{type: 'function', name, ...}`), `tool_choice` and `parallel_tool_calls`. */
export function responsesClientTools(body: { tools?: unknown; tool_choice?: unknown; parallel_tool_calls?: unknown }): ClientToolFields {
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) throw new Errors.VALIDATION('tools must be an array of function tools');
  const tools = ((body.tools ?? []) as unknown[]).map((raw, i) => {
    const t = raw as { type?: unknown } | null;
    if (!t || typeof t !== 'object' || t.type !== 'function') {
      throw new Errors.VALIDATION(`tools[${i}]: only function tools are supported; the agent brings its own hosted tools (got type ${JSON.stringify(t && typeof t === 'object' ? (t.type ?? null) : null)})`);
    }
    return clientTool(t as ClientTool, `tools[${i}]`);
  });
  const choice = toolChoiceOf(body.tool_choice, tools, (c) => c.name);
  return fields(tools, choice, parallelOf(body.parallel_tool_calls));
}

/** An agent may refuse the client's tools (`clientTools: false` on its `ai/agent` node): the request gets today's 400. */
export function assertAgentTakesClientTools(agent: RuleChainRow, request: ClientToolFields): void {
  if (!request.clientTools?.length) return;
  // The DSL was validated when saved: its first ai/agent node is the one that answers.
  const nodes = (agent.dsl as { metadata?: { nodes?: Array<{ type?: unknown; configuration?: { clientTools?: unknown } }> } } | null)?.metadata?.nodes ?? [];
  if (nodes.find((n) => n.type === 'ai/agent')?.configuration?.clientTools === false) throw new Errors.VALIDATION(CLIENT_TOOLS_REFUSED);
}

/** An assistant message's `tool_calls` in the client's history, checked. */
export function toolCallsOf(value: unknown, where: string): RunToolCall[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw new Errors.VALIDATION(`${where}.tool_calls must be an array`);
  return value.map((raw: unknown, j) => {
    const c = raw as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
    if (!c || typeof c !== 'object' || typeof c.id !== 'string' || c.id === '' || (c.type !== undefined && c.type !== 'function') || typeof c.function?.name !== 'string') {
      throw new Errors.VALIDATION(`${where}.tool_calls[${j}] must be {id, type: "function", function: {name, arguments}}`);
    }
    const args = c.function.arguments;
    return { id: c.id, type: 'function' as const, function: { name: c.function.name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) } };
  });
}
