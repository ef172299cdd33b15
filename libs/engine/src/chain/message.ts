import { randomUUID } from 'node:crypto';
import type { ScriptInput } from '../sandbox/sandbox.js';
import type { RuleMsg } from './types.js';

/** A new message; `data` that is not a string is stored as JSON text. */
export function createRuleMsg(init: { data?: unknown; type?: string; metadata?: Record<string, string>; id?: string } = {}): RuleMsg {
  const data = init.data === undefined ? '' : typeof init.data === 'string' ? init.data : JSON.stringify(init.data);
  return { id: init.id ?? randomUUID(), type: init.type ?? 'MESSAGE', data, metadata: { ...init.metadata } };
}

/** A copy whose metadata can be changed without touching the original. */
export function cloneMsg(msg: RuleMsg): RuleMsg {
  return { id: msg.id, type: msg.type, data: msg.data, metadata: { ...msg.metadata } };
}

/** `data` parsed when it is JSON, else the text itself (what scripts see as `msg`). */
export function parseMsgData(data: string): unknown {
  const parsed = parseJson(data);
  return parsed ? parsed.value : data;
}

function parseJson(data: string): { value: unknown } | undefined {
  const t = data.trimStart();
  if (t === '' || !'{["-0123456789tfn'.includes(t[0] as string)) return undefined;
  try {
    return { value: JSON.parse(data) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * RuleGo's `dataType` of a message: Agentry messages carry no such field, so it is told from the
 * data: `JSON` when it parses as JSON, else `TEXT` (BINARY never occurs: data is text).
 */
export function dataTypeOf(msg: RuleMsg): 'JSON' | 'TEXT' {
  return parseJson(msg.data) ? 'JSON' : 'TEXT';
}

/** A value as message data: strings as they are, anything else as JSON. */
export function toMsgData(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value) ?? '';
}

/** A metadata value: strings as they are, anything else as JSON (`5`, `true`, `{"a":1}`). */
export function toMetadataValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return JSON.stringify(value);
}

/** The arguments of a chain script: `msg` (parsed data), `metadata`, `msgType`, `dataType`. */
export function scriptInput(msg: RuleMsg): ScriptInput {
  const parsed = parseJson(msg.data);
  return { msg: parsed ? parsed.value : msg.data, metadata: { ...msg.metadata }, msgType: msg.type, dataType: parsed ? 'JSON' : 'TEXT' };
}

/** A script result for an error message: JSON, cut at 60 characters. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * What RuleGo's expressions see: `id`, `data` (the text), `msg` (parsed when JSON), `metadata`,
 * `type` and `dataType` (`ts` is nil: Agentry messages carry no timestamp).
 */
export function exprEnv(msg: RuleMsg): Record<string, unknown> {
  const input = scriptInput(msg);
  return { id: msg.id, data: msg.data, msg: input.msg, metadata: input.metadata, type: msg.type, dataType: input.dataType };
}
