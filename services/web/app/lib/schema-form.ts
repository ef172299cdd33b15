/**
 * The pure half of the JSON-schema form renderer (`components/SchemaForm.tsx`): which control
 * each property of an object schema becomes, how a control's text maps to a value and back, the
 * checks the browser can make before the server does, and where a server problem's path lands.
 * No DOM and no React here, so that it is tested on its own (`test/schema-form.test.ts`).
 *
 * It reads the JSON Schema that TypeBox emits (`GET /tools/forms`): `type`, `properties`,
 * `required`, `items`, `enum`/`const`/`anyOf` of literals, `minimum`/`maximum`,
 * `minLength`/`maxLength`, `format`, `title`, `description`, `default`, and
 * `additionalProperties`/`patternProperties` for open records. Anything else becomes JSON text.
 */

export interface JsonSchema {
  type?: string | string[];
  title?: string;
  description?: string;
  default?: unknown;
  format?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  patternProperties?: Record<string, JsonSchema>;
  items?: JsonSchema | JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  [keyword: string]: unknown;
}

/**
 * What the page may add to a property the schema describes (keyed by dotted path, `params.stop`).
 * The schema's own `title` and `description` come first; these fill the gaps.
 */
export interface FieldHint {
  /** Used when the schema has no `title` (else the property name, humanised). */
  label?: string;
  /** Shown after the schema's `description`; `backticks` become code. */
  hint?: string;
  placeholder?: string;
  /** Forces a multi-line text box (or a single line with false). */
  multiline?: boolean;
  rows?: number;
  /** A string with known values: a select of these, plus "not set" and the current value. */
  options?: Array<{ value: string; label: string }>;
  /** The label of the select's empty option (default "(not set)"). */
  emptyLabel?: string;
  /** Suggestions for a free text field (a datalist). */
  suggestions?: Array<{ value: string; label?: string }>;
}

interface FieldBase {
  /** Property names from the form's root. */
  path: string[];
  /** `path` dotted: the key of errors, hints and custom renderers. */
  id: string;
  label: string;
  /** The schema's description and the page's hint, in that order. */
  help: string | undefined;
  required: boolean;
  schema: JsonSchema;
  /** Takes a whole row of the form's grid (text boxes, fieldsets, JSON) rather than half of one. */
  wide: boolean;
}

export type Field =
  | (FieldBase & { kind: 'text'; multiline: boolean; rows: number; placeholder?: string; suggestions?: Array<{ value: string; label?: string }>; code?: 'javascript' })
  | (FieldBase & { kind: 'number'; integer: boolean; placeholder?: string })
  | (FieldBase & { kind: 'boolean' })
  | (FieldBase & { kind: 'select'; options: Array<{ value: unknown; label: string }>; emptyLabel: string; placeholder?: string })
  | (FieldBase & { kind: 'string-list'; rows: number })
  | (FieldBase & { kind: 'object'; fields: Field[]; open: boolean })
  | (FieldBase & { kind: 'json' });

export type FieldKind = Field['kind'];

/**
 * When a string gets a multi-line box: the schema says so (`format` `textarea`, `markdown` or
 * `multiline`, or a `maxLength` over 200, or a text `contentMediaType`), or the property is named
 * like a prompt (`systemPrompt`, `prompt`, `instructions`, `template`). The engine's schemas give
 * no length hint (`systemPrompt` is a bare `Type.String()`), and a prompt is paragraphs of text by
 * nature, so the name is the signal that works today; the `format` rule lets a schema opt in later
 * without a change here.
 */
export const MULTILINE_FORMATS = ['textarea', 'markdown', 'multiline'];
const MULTILINE_NAME = /(^|[a-z])(prompt|Prompt|instructions|Instructions|template|Template)$/;

export function isMultiline(key: string, schema: JsonSchema): boolean {
  if (typeof schema.format === 'string' && MULTILINE_FORMATS.includes(schema.format)) return true;
  if (typeof schema.maxLength === 'number' && schema.maxLength > 200) return true;
  if (typeof schema.contentMediaType === 'string' && schema.contentMediaType.startsWith('text/')) return true;
  return MULTILINE_NAME.test(key);
}

/**
 * When a string is a script (a code editor rather than a text box): the schema says so (`format`
 * `javascript`, or `contentMediaType` `application/javascript`), or the property is RuleGo's
 * `jsScript` (the engine's script nodes declare a bare `Type.String()`).
 */
export function isScript(key: string, schema: JsonSchema): boolean {
  if (schema.format === 'javascript' || schema.contentMediaType === 'application/javascript' || schema.contentMediaType === 'text/javascript') return true;
  return key === 'jsScript';
}

// Abbreviations that camelCase keys spell as words (`restEndpointUrlPattern`, `jsScript`): a label says them as people write them.
const ABBREVIATIONS = new Set(['api', 'http', 'id', 'ip', 'js', 'json', 'mcp', 'uri', 'url']);

/** `systemPrompt` -> "System prompt", `max_tokens` -> "Max tokens", `topP` -> "Top p", `restEndpointUrlPattern` -> "Rest endpoint URL pattern". */
export function humanize(key: string): string {
  const words = key
    .replace(/[_-]+/g, ' ')
    .replace(/([a-z\d])([A-Z])/g, '$1 $2')
    .trim()
    .split(/\s+/)
    .map((w) => (/^[A-Z\d]+$/.test(w) && w.length > 1 ? w : ABBREVIATIONS.has(w.toLowerCase()) ? w.toUpperCase() : w.toLowerCase()));
  const text = words.join(' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The schema without `null` alternatives (`Type.Union([X, Type.Null()])`, `type: ['string', 'null']`). */
function nonNull(schema: JsonSchema): JsonSchema {
  if (Array.isArray(schema.type)) {
    const types = schema.type.filter((t) => t !== 'null');
    return types.length === 1 ? { ...schema, type: types[0] } : schema;
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key];
    if (!branches) continue;
    const rest = branches.filter((b) => b.type !== 'null');
    if (rest.length === 1 && rest.length < branches.length) {
      const { [key]: _branches, ...outer } = schema;
      return { ...outer, ...rest[0] };
    }
  }
  return schema;
}

/** The allowed values when the schema is an `enum` or a union of `const`s, else undefined. */
export function enumValues(schema: JsonSchema): unknown[] | undefined {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum;
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches && branches.length > 0 && branches.every((b) => 'const' in b)) return branches.map((b) => b.const);
  return undefined;
}

function typeOf(schema: JsonSchema): string | undefined {
  if (typeof schema.type === 'string') return schema.type;
  if (schema.properties) return 'object';
  return undefined;
}

/** Whether an object schema takes keys beyond its `properties` on purpose (a record). */
export function isOpenRecord(schema: JsonSchema): boolean {
  return Boolean(schema.additionalProperties) || (schema.patternProperties !== undefined && Object.keys(schema.patternProperties).length > 0);
}

/** The control one property becomes. */
export function fieldOf(key: string, raw: JsonSchema, required: boolean, hints: Record<string, FieldHint> = {}, parent: string[] = []): Field {
  const schema = nonNull(raw);
  const path = [...parent, key];
  const id = path.join('.');
  const hint = hints[id] ?? {};
  const help = [schema.description, hint.hint].filter((t): t is string => Boolean(t)).join(' ') || undefined;
  const base: FieldBase = { path, id, label: schema.title ?? hint.label ?? humanize(key), help, required, schema, wide: false };
  const type = typeOf(schema);
  const values = enumValues(schema);

  if (values) return { ...base, kind: 'select', options: values.map((v) => ({ value: v, label: String(v) })), emptyLabel: hint.emptyLabel ?? '(not set)' };
  if (type === 'string' && hint.options) {
    return {
      ...base,
      kind: 'select',
      options: hint.options,
      emptyLabel: hint.emptyLabel ?? '(not set)',
      ...(hint.placeholder !== undefined ? { placeholder: hint.placeholder } : {}),
    };
  }
  if (type === 'string') {
    const code = isScript(key, schema);
    const multiline = code || (hint.multiline ?? isMultiline(key, schema));
    return {
      ...base,
      wide: multiline,
      kind: 'text',
      multiline,
      ...(code ? { code: 'javascript' as const } : {}),
      rows: hint.rows ?? (multiline ? 8 : 1),
      ...(hint.placeholder !== undefined ? { placeholder: hint.placeholder } : {}),
      ...(hint.suggestions ? { suggestions: hint.suggestions } : {}),
    };
  }
  if (type === 'integer' || type === 'number') {
    return { ...base, kind: 'number', integer: type === 'integer', ...(hint.placeholder !== undefined ? { placeholder: hint.placeholder } : {}) };
  }
  if (type === 'boolean') return { ...base, kind: 'boolean' };
  if (type === 'array' && schema.items && !Array.isArray(schema.items)) {
    const items = nonNull(schema.items);
    if (typeOf(items) === 'string' && !enumValues(items)) return { ...base, wide: true, kind: 'string-list', rows: hint.rows ?? 3 };
  }
  if (type === 'object' && schema.properties && Object.keys(schema.properties).length > 0) {
    return { ...base, wide: true, kind: 'object', fields: fieldsOf(schema, hints, path), open: isOpenRecord(schema) };
  }
  return { ...base, wide: true, kind: 'json' };
}

/** The controls of an object schema's properties, in the schema's order. */
export function fieldsOf(schema: JsonSchema, hints: Record<string, FieldHint> = {}, parent: string[] = []): Field[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).map(([key, s]) => fieldOf(key, s, required.has(key), hints, parent));
}

/** Every field's dotted path, nested ones included: where server problems may land. */
export function fieldIds(fields: Field[]): string[] {
  return fields.flatMap((f) => [f.id, ...(f.kind === 'object' ? fieldIds(f.fields) : [])]);
}

// ---- values ----------------------------------------------------------------------------------

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function getAt(value: unknown, path: string[]): unknown {
  let cur = value;
  for (const key of path) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

/**
 * `value` with `path` set (a copy; nothing is changed in place). `undefined` removes the key, and
 * an object that this leaves empty is removed from its parent too (an optional `params` with no
 * parameter left is not kept as `{}`); the root stays.
 */
export function setAt(value: Record<string, unknown>, path: string[], next: unknown): Record<string, unknown> {
  const [key, ...rest] = path;
  if (key === undefined) return isPlainObject(next) ? next : value;
  const copy: Record<string, unknown> = { ...value };
  let child = next;
  if (rest.length > 0) {
    const inner = setAt(isPlainObject(value[key]) ? value[key] : {}, rest, next);
    child = Object.keys(inner).length > 0 ? inner : undefined;
  }
  if (child === undefined) delete copy[key];
  else copy[key] = child;
  return copy;
}

/** The keys of an object field's value that none of its controls edits (its "other" JSON). */
export function extraEntries(field: Extract<Field, { kind: 'object' }>, value: unknown): Record<string, unknown> {
  if (!isPlainObject(value)) return {};
  const known = new Set(field.fields.map((f) => f.path[f.path.length - 1]));
  return Object.fromEntries(Object.entries(value).filter(([k]) => !known.has(k)));
}

/** The object field's value with its extra keys replaced by `extra` (which may also set known keys). */
export function withExtraEntries(field: Extract<Field, { kind: 'object' }>, value: unknown, extra: Record<string, unknown>): Record<string, unknown> | undefined {
  const known = new Set(field.fields.map((f) => f.path[f.path.length - 1]));
  const kept = isPlainObject(value) ? Object.fromEntries(Object.entries(value).filter(([k]) => known.has(k))) : {};
  const next = { ...kept, ...extra };
  return Object.keys(next).length > 0 ? next : undefined;
}

/** The text a number control shows. */
export function numberText(value: unknown): string {
  return value === undefined || value === null ? '' : String(value);
}

/** A number control's text as the value: empty is "not set", a number a number; anything else stays text for the checks to flag. */
export function parseNumber(text: string): number | string | undefined {
  const t = text.trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : text;
}

/** One entry per line; blank lines are dropped. */
export function parseLines(text: string): string[] | undefined {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  return lines.length > 0 ? lines : undefined;
}

/** A string list as lines (a lone string, which some fields also take, is one line). */
export function linesText(value: unknown): string {
  if (typeof value === 'string') return value;
  return Array.isArray(value) ? value.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join('\n') : '';
}

export function jsonText(value: unknown): string {
  return value === undefined ? '' : JSON.stringify(value, null, 2);
}

/** A JSON control's text as the value: empty is "not set"; a syntax error or the wrong top-level type is a problem. */
export function parseJsonField(text: string, schema: JsonSchema): { ok: true; value: unknown } | { ok: false; problem: string } {
  if (text.trim() === '') return { ok: true, value: undefined };
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    return { ok: false, problem: `not valid JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  const type = typeOf(nonNull(schema));
  if (type === 'array' && !Array.isArray(value)) return { ok: false, problem: 'must be a JSON list: [ ... ]' };
  if (type === 'object' && !isPlainObject(value)) return { ok: false, problem: 'must be a JSON object: { ... }' };
  return { ok: true, value };
}

/** The select options for `value`: "not set" first unless required, and the current value when the options lack it. */
export function selectOptions(field: Extract<Field, { kind: 'select' }>, value: unknown): Array<{ value: string; label: string }> {
  const options = field.options.map((o) => ({ value: String(o.value), label: o.label }));
  const out = field.required && value !== undefined ? [] : [{ value: '', label: field.emptyLabel }];
  out.push(...options);
  if (value !== undefined && value !== '' && !options.some((o) => o.value === String(value))) out.push({ value: String(value), label: `${String(value)} (unknown)` });
  return out;
}

/** The value a select's option string stands for (an enum of numbers or booleans keeps its type). */
export function selectValue(field: Extract<Field, { kind: 'select' }>, text: string): unknown {
  if (text === '') return undefined;
  const option = field.options.find((o) => String(o.value) === text);
  return option ? option.value : text;
}

/**
 * A compact picture of what a JSON control expects, from its schema: `[{type?, name?, timeout?}]`,
 * `{url, headers?}`; undefined when the schema says too little to help.
 */
export function shapeOf(schema: JsonSchema, depth = 0): string | undefined {
  const s = nonNull(schema);
  const type = typeOf(s);
  if (type === 'array') {
    const inner = s.items && !Array.isArray(s.items) ? shapeOf(s.items, depth + 1) : undefined;
    return `[${inner ?? '…'}]`;
  }
  if (type === 'object') {
    const keys = Object.keys(s.properties ?? {});
    if (keys.length === 0) return isOpenRecord(s) ? '{"key": value, …}' : undefined;
    if (depth > 1) return '{…}';
    const required = new Set(s.required ?? []);
    return `{${keys.map((k) => `${k}${required.has(k) ? '' : '?'}`).join(', ')}${isOpenRecord(s) ? ', …' : ''}}`;
  }
  return type;
}

// ---- checks ----------------------------------------------------------------------------------

function rangeText(schema: JsonSchema): string {
  const lo = schema.minimum ?? schema.exclusiveMinimum;
  const hi = schema.maximum ?? schema.exclusiveMaximum;
  const loText = schema.exclusiveMinimum !== undefined && schema.minimum === undefined ? `more than ${lo}` : `at least ${lo}`;
  const hiText = schema.exclusiveMaximum !== undefined && schema.maximum === undefined ? `less than ${hi}` : `at most ${hi}`;
  if (lo !== undefined && hi !== undefined) return schema.minimum !== undefined && schema.maximum !== undefined ? `from ${lo} to ${hi}` : `${loText} and ${hiText}`;
  if (lo !== undefined) return loText;
  if (hi !== undefined) return hiText;
  return '';
}

/** Why a number control's value is refused, in words ("a whole number, at least 1"); null when it is fine or unset. */
export function numberProblem(field: Extract<Field, { kind: 'number' }>, value: unknown): string | null {
  if (value === undefined) return null;
  const s = field.schema;
  const what = `${field.integer ? 'a whole number' : 'a number'}${rangeText(s) ? `, ${rangeText(s)}` : ''}`;
  if (typeof value !== 'number' || !Number.isFinite(value)) return what;
  if (field.integer && !Number.isInteger(value)) return what;
  if (s.minimum !== undefined && value < s.minimum) return what;
  if (s.maximum !== undefined && value > s.maximum) return what;
  if (s.exclusiveMinimum !== undefined && value <= s.exclusiveMinimum) return what;
  if (s.exclusiveMaximum !== undefined && value >= s.exclusiveMaximum) return what;
  return null;
}

function textProblem(field: Extract<Field, { kind: 'text' }>, value: unknown): string | null {
  if (value === undefined) return field.required ? 'required' : null;
  if (typeof value !== 'string') return 'must be text';
  const { minLength, maxLength } = field.schema;
  if (minLength !== undefined && value.length < minLength) return `at least ${minLength} characters`;
  if (maxLength !== undefined && value.length > maxLength) return `at most ${maxLength} characters`;
  return null;
}

/**
 * What the browser can tell before the server does, by field id: numbers against their type and
 * range, text against its length. These are advice (the server stays the judge); they show at the
 * field until the server says something about it.
 */
export function clientProblems(fields: Field[], value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fields) {
    const v = getAt(value, f.path);
    const problem = f.kind === 'number' ? numberProblem(f, v) : f.kind === 'text' ? textProblem(f, v) : null;
    if (problem) out[f.id] = problem;
    if (f.kind === 'object') Object.assign(out, clientProblems(f.fields, value));
  }
  return out;
}

// ---- server problems -------------------------------------------------------------------------

/** A problem path (`tools[0].timeout`) under a field (`tools`), or not. */
function isUnder(problemPath: string, fieldId: string): boolean {
  return problemPath === fieldId || problemPath.startsWith(`${fieldId}.`) || problemPath.startsWith(`${fieldId}[`);
}

/**
 * The field a problem about `problemPath` (dotted, `[i]` for list items, relative to the form's
 * root) belongs to: the deepest one whose path leads to it, or undefined.
 */
export function fieldForPath(problemPath: string, ids: string[]): string | undefined {
  let best: string | undefined;
  for (const id of ids) if (isUnder(problemPath, id) && (!best || id.length > best.length)) best = id;
  return best;
}

/** Drops the problems an edit of `id` may have answered: its own, its children's and its parents'. */
export function clearProblemsAt(problems: Record<string, string>, id: string): Record<string, string> {
  return Object.fromEntries(Object.entries(problems).filter(([k]) => !(isUnder(k, id) || isUnder(id, k))));
}
