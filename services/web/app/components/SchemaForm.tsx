import { Fragment, useEffect, useId, useRef, useState, type ReactNode } from 'react';
import {
  extraEntries,
  getAt,
  jsonText,
  linesText,
  numberText,
  parseJsonField,
  parseLines,
  parseNumber,
  selectOptions,
  selectValue,
  setAt,
  shapeOf,
  withExtraEntries,
  type Field,
  type JsonSchema,
} from '../lib/schema-form';
import { CodeField } from './CodeField';
import { ErrorText, SelectField, TextArea, TextField } from './ui';

/**
 * A form generated from a JSON schema's properties (see lib/schema-form.ts for which control each
 * one becomes). Every control has a label (the schema's title, the page's hint, or the property
 * name), its help below it and its error at it; short controls share a row, long ones take it.
 */

export interface CustomFieldProps {
  field: Field;
  value: unknown;
  error: string | null;
  onValue: (value: unknown) => void;
}

export interface SchemaFormProps {
  fields: Field[];
  /** The object the fields edit. */
  value: Record<string, unknown>;
  /** The whole object after a change, and the id (dotted path) of the field that changed. */
  onChange: (next: Record<string, unknown>, id: string) => void;
  /** Errors by field id (the server's first, then the browser's checks). */
  errors?: Record<string, string | null | undefined>;
  /** Controls the page draws itself, by field id; returning undefined falls back to the generated one. */
  custom?: Record<string, (props: CustomFieldProps) => ReactNode>;
  /** JSON and list text that does not parse yet (it is not in `value`), by field id; null when it does again. */
  onTextProblem?: (id: string, problem: string | null) => void;
}

/** Text with `backticks` shown as code (schema descriptions and page hints). */
export function HelpText({ text }: { text: string | undefined }): ReactNode {
  if (!text) return null;
  return text.split(/(`[^`]+`)/).map((part, i) => (part.startsWith('`') && part.endsWith('`') && part.length > 1 ? <code key={i}>{part.slice(1, -1)}</code> : <Fragment key={i}>{part}</Fragment>));
}

export function SchemaForm(props: SchemaFormProps) {
  return (
    <div className="schema-grid">
      {props.fields.map((f) => (
        <SchemaField key={f.id} field={f} {...props} />
      ))}
    </div>
  );
}

function SchemaField({ field, value: root, onChange, errors = {}, custom = {}, onTextProblem }: SchemaFormProps & { field: Field }) {
  const value = getAt(root, field.path);
  const error = errors[field.id] || null;
  const set = (next: unknown) => onChange(setAt(root, field.path, next), field.id);
  const help = field.help ? <HelpText text={field.help} /> : undefined;
  const className = field.wide ? 'wide' : undefined;

  const own = custom[field.id]?.({ field, value, error, onValue: set });
  if (own !== undefined) return <>{own}</>;

  switch (field.kind) {
    case 'text':
      return field.code ? (
        <CodeField label={field.label} hint={help} error={error} className={className} language={field.code} value={typeof value === 'string' ? value : ''} onValue={(v) => set(v === '' && !field.required ? undefined : v)} rows={field.rows} />
      ) : field.multiline ? (
        <TextArea label={field.label} hint={help} error={error} className={className} value={typeof value === 'string' ? value : ''} onValue={(v) => set(v === '' && !field.required ? undefined : v)} rows={field.rows} placeholder={field.placeholder} />
      ) : (
        <TextInput field={field} value={value} error={error} help={help} className={className} onValue={set} />
      );
    case 'number':
      return (
        <TextField
          label={field.label}
          hint={help}
          error={error}
          className={className}
          // A value that is not a number (set in the DSL tab) stays visible as text, flagged by the checks.
          type={value === undefined || typeof value === 'number' ? 'number' : 'text'}
          inputMode={field.integer ? 'numeric' : 'decimal'}
          min={field.schema.minimum ?? field.schema.exclusiveMinimum}
          max={field.schema.maximum ?? field.schema.exclusiveMaximum}
          step={field.integer ? 1 : 'any'}
          placeholder={field.placeholder}
          value={numberText(value)}
          onValue={(v) => set(parseNumber(v))}
        />
      );
    case 'boolean':
      return <BooleanField field={field} value={value} error={error} help={help} onValue={set} />;
    case 'select':
      return (
        <SelectField
          label={field.label}
          hint={help}
          error={error}
          className={className}
          value={value === undefined ? '' : String(value as string)}
          onValue={(v) => set(selectValue(field, v))}
          options={selectOptions(field, value)}
        />
      );
    case 'string-list':
      return (
        <DraftText
          label={field.label}
          hint={<>{help ? <>{help} </> : null}One per line.</>}
          error={error}
          className={className}
          rows={field.rows}
          value={value}
          format={linesText}
          parse={(text) => ({ ok: true, value: parseLines(text) })}
          onValue={set}
          onProblem={(p) => onTextProblem?.(field.id, p)}
        />
      );
    case 'object':
      return <ObjectField field={field} value={value} error={error} help={help} root={root} onChange={onChange} errors={errors} custom={custom} onTextProblem={onTextProblem} />;
    case 'json':
      return <JsonField label={field.label} schema={field.schema} value={value} error={error} help={field.help} className={className} onValue={set} onProblem={(p) => onTextProblem?.(field.id, p)} />;
  }
}

function TextInput({ field, value, error, help, className, onValue }: { field: Extract<Field, { kind: 'text' }>; value: unknown; error: string | null; help: ReactNode; className: string | undefined; onValue: (v: unknown) => void }) {
  const listId = useId();
  return (
    <>
      <TextField
        label={field.label}
        hint={help}
        error={error}
        className={className}
        value={typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value)}
        onValue={(v) => onValue(v === '' && !field.required ? undefined : v)}
        placeholder={field.placeholder}
        list={field.suggestions?.length ? listId : undefined}
      />
      {field.suggestions?.length ? (
        <datalist id={listId}>
          {field.suggestions.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label ?? s.value}
            </option>
          ))}
        </datalist>
      ) : null}
    </>
  );
}

/**
 * A checkbox: checked is the value, else the schema's default, else false. Choosing what the
 * default already is removes the key (the DSL stays as short as it was).
 */
function BooleanField({ field, value, error, help, onValue }: { field: Field; value: unknown; error: string | null; help: ReactNode; onValue: (v: unknown) => void }) {
  const id = useId();
  const fallback = field.schema.default === true;
  const checked = typeof value === 'boolean' ? value : fallback;
  const described = [help ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className={`field field-check${error ? ' has-error' : ''}`}>
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onValue(e.target.checked === fallback && !field.required ? undefined : e.target.checked)} aria-invalid={error ? true : undefined} aria-describedby={described} />
      <label htmlFor={id}>{field.label}</label>
      {help ? (
        <p className="hint" id={`${id}-hint`}>
          {help}
        </p>
      ) : null}
      <ErrorText error={error} id={`${id}-error`} />
    </div>
  );
}

/** A fieldset of the object's own fields, then (for a record, or when the value has keys no field edits) the other keys as JSON. */
function ObjectField({
  field,
  value,
  error,
  help,
  root,
  onChange,
  errors,
  custom,
  onTextProblem,
}: Omit<SchemaFormProps, 'fields' | 'value'> & { field: Extract<Field, { kind: 'object' }>; value: unknown; error: string | null; help: ReactNode; root: Record<string, unknown> }) {
  const id = useId();
  const extra = extraEntries(field, value);
  const showExtra = field.open || Object.keys(extra).length > 0;
  const described = [help ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <fieldset className={`field wide schema-object${error ? ' has-error' : ''}`} aria-describedby={described}>
      <legend>{field.label}</legend>
      {help ? (
        <p className="hint" id={`${id}-hint`}>
          {help}
        </p>
      ) : null}
      <SchemaForm fields={field.fields} value={root} onChange={onChange} errors={errors} custom={custom} onTextProblem={onTextProblem} />
      {showExtra ? (
        <JsonField
          label={`Other ${field.label.charAt(0).toLowerCase()}${field.label.slice(1)} (JSON)`}
          schema={{ type: 'object' }}
          showShape={false}
          value={Object.keys(extra).length > 0 ? extra : undefined}
          error={null}
          help={field.open ? 'Any other keys, as one JSON object.' : 'Keys no field above edits, as one JSON object.'}
          className="wide"
          onValue={(next) => onChange(setAt(root, field.path, withExtraEntries(field, value, (next ?? {}) as Record<string, unknown>)), field.id)}
          onProblem={(p) => onTextProblem?.(`${field.id}.*`, p)}
        />
      ) : null}
      <ErrorText error={error} id={`${id}-error`} />
    </fieldset>
  );
}

/** JSON text for what the form has no control for, with the shape the schema expects (`[{name?, timeout?}]`). */
export function JsonField({
  label,
  schema,
  value,
  error,
  help,
  className,
  showShape = true,
  onValue,
  onProblem,
}: {
  label: string;
  schema: JsonSchema;
  value: unknown;
  error: string | null;
  help: string | undefined;
  className?: string | undefined;
  showShape?: boolean;
  onValue: (v: unknown) => void;
  onProblem: (problem: string | null) => void;
}) {
  const shape = showShape ? shapeOf(schema) : undefined;
  return (
    <DraftText
      label={label}
      hint={
        help || shape ? (
          <>
            <HelpText text={help} />
            {shape ? (
              <>
                {help ? ' ' : null}JSON: <code>{shape}</code>
              </>
            ) : null}
          </>
        ) : undefined
      }
      error={error}
      className={`json-field${className ? ` ${className}` : ''}`}
      rows={Math.min(12, Math.max(3, jsonText(value).split('\n').length + 1))}
      spellCheck={false}
      value={value}
      format={jsonText}
      parse={(text) => {
        const parsed = parseJsonField(text, schema);
        return parsed.ok ? parsed : { ok: false, problem: parsed.problem };
      }}
      onValue={onValue}
      onProblem={onProblem}
    />
  );
}

/**
 * A text box whose text is kept as typed (a half-written JSON or a trailing new line) while the
 * value follows it whenever the text parses; a change of the value from outside (another tab,
 * a save) replaces the text. Text that does not parse shows its problem at the box.
 */
function DraftText({
  value,
  format,
  parse,
  onValue,
  onProblem,
  error,
  ...rest
}: {
  label: string;
  hint: ReactNode;
  error: string | null;
  className: string | undefined;
  rows: number;
  spellCheck?: boolean;
  value: unknown;
  format: (v: unknown) => string;
  parse: (text: string) => { ok: true; value: unknown } | { ok: false; problem: string };
  onValue: (v: unknown) => void;
  onProblem: (problem: string | null) => void;
}) {
  const [text, setText] = useState(() => format(value));
  const [problem, setProblem] = useState<string | null>(null);
  const last = useRef<unknown>(value);
  useEffect(() => {
    // Ours: the value this text produced. Theirs: replace the text.
    if (JSON.stringify(value) === JSON.stringify(last.current)) return;
    last.current = value;
    setText(format(value));
    setProblem(null);
    onProblem(null);
    // format and onProblem are new on every render; the value alone decides.
  }, [value]);
  // A box that goes away (another tab) leaves no problem behind.
  useEffect(() => () => onProblem(null), []);
  return (
    <TextArea
      {...rest}
      value={text}
      error={problem ?? error}
      onValue={(t) => {
        setText(t);
        const parsed = parse(t);
        if (!parsed.ok) {
          setProblem(parsed.problem);
          onProblem(parsed.problem);
          return;
        }
        setProblem(null);
        onProblem(null);
        last.current = parsed.value;
        onValue(parsed.value);
      }}
    />
  );
}
