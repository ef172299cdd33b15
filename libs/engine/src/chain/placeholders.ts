import { parseMsgData } from './message.js';
import type { RuleMsg } from './types.js';

/**
 * Fills `${...}` placeholders from a message, RuleGo style:
 * - `${msg}` / `${data}`: the data as it is; `${msg.a.b}`: a field of the data parsed as JSON
 *   (a string as it is, anything else as JSON, a missing field as `''`);
 * - `${metadata.x}`: a metadata value (`''` when absent); `${metadata}`: all of it as JSON;
 * - `${msgType}` / `${type}`, `${id}`;
 * - `${x}`: the metadata value `x` when there is one; otherwise the placeholder stays as written.
 * Values are inserted as they are (no URL or JSON escaping).
 */
export function renderTemplate(template: string, msg: RuleMsg): string {
  if (!template.includes('${')) return template;
  let parsed: { value: unknown } | undefined;
  const data = () => (parsed ??= { value: parseMsgData(msg.data) }).value;
  return template.replace(/\$\{\s*([^{}]+?)\s*\}/g, (whole, key: string) => {
    if (key === 'msg' || key === 'data') return msg.data;
    if (key === 'msgType' || key === 'type') return msg.type;
    if (key === 'id') return msg.id;
    if (key === 'metadata') return JSON.stringify(msg.metadata);
    if (key.startsWith('metadata.')) return msg.metadata[key.slice('metadata.'.length)] ?? '';
    if (key.startsWith('msg.') || key.startsWith('data.')) return show(pick(data(), key.slice(key.indexOf('.') + 1).split('.')));
    return Object.hasOwn(msg.metadata, key) ? (msg.metadata[key] as string) : whole;
  });
}

function pick(value: unknown, path: string[]): unknown {
  let v = value;
  for (const part of path) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function show(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
