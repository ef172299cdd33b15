import { humanError } from '../lib/errors';
import { useEffect, useId, useState, type ChangeEvent, type InputHTMLAttributes, type LabelHTMLAttributes, type ReactNode, type SelectHTMLAttributes, type TextareaHTMLAttributes } from 'react';

/** Small form and layout pieces; every control has a label, errors sit at their field. */

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="page-header">
      <h1>{title}</h1>
      {children ? <div className="actions">{children}</div> : null}
    </div>
  );
}

/** An error as people read it (`humanError`), the gateway's own text behind a disclosure. */
export function ErrorText({ error, id, className = 'error-text' }: { error: string | null | undefined; id?: string; className?: string }) {
  if (!error) return null;
  const { summary, detail } = humanError(error);
  return (
    <div className={className} role="alert" id={id}>
      <p>{summary}</p>
      {detail ? (
        <details className="error-detail">
          <summary>Technical detail</summary>
          <code>{detail}</code>
        </details>
      ) : null}
    </div>
  );
}

export function Notice({ kind = 'info', children }: { kind?: 'info' | 'warn' | 'ok' | 'error'; children: ReactNode }) {
  return <div className={`notice notice-${kind}`} role={kind === 'error' ? 'alert' : 'status'}>{children}</div>;
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p className="muted" role="status">
      {what}…
    </p>
  );
}

interface FieldProps {
  label: string;
  hint?: ReactNode;
  error?: string | null | undefined;
  className?: string;
}

/** A control's label, hint and error round it; `labelProps` for a control no `for` can name (a code editor). */
export function FieldShell({ id, label, hint, error, className, labelProps, children }: FieldProps & { id: string; labelProps?: LabelHTMLAttributes<HTMLLabelElement>; children: ReactNode }) {
  return (
    <div className={`field${error ? ' has-error' : ''}${className ? ` ${className}` : ''}`}>
      <label htmlFor={id} {...labelProps}>
        {label}
      </label>
      {children}
      {hint ? (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
      <ErrorText error={error} id={`${id}-error`} />
    </div>
  );
}

export function describedBy(id: string, hint: unknown, error: unknown): string | undefined {
  return [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
}

export function TextField({
  label,
  hint,
  error,
  className,
  value,
  onValue,
  ...rest
}: FieldProps & Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onChange'> & { value: string; onValue: (v: string) => void }) {
  const id = useId();
  return (
    <FieldShell id={id} label={label} hint={hint} error={error} className={className}>
      <input
        id={id}
        value={value}
        onChange={(e: ChangeEvent<HTMLInputElement>) => onValue(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(id, hint, error)}
        {...rest}
      />
    </FieldShell>
  );
}

export function TextArea({
  label,
  hint,
  error,
  className,
  value,
  onValue,
  ...rest
}: FieldProps & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, 'value' | 'onChange'> & { value: string; onValue: (v: string) => void }) {
  const id = useId();
  return (
    <FieldShell id={id} label={label} hint={hint} error={error} className={className}>
      <textarea
        id={id}
        value={value}
        onChange={(e) => onValue(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(id, hint, error)}
        {...rest}
      />
    </FieldShell>
  );
}

export function SelectField({
  label,
  hint,
  error,
  className,
  value,
  onValue,
  options,
  ...rest
}: FieldProps &
  Omit<SelectHTMLAttributes<HTMLSelectElement>, 'value' | 'onChange'> & {
    value: string;
    onValue: (v: string) => void;
    options: Array<{ value: string; label: string }>;
  }) {
  const id = useId();
  return (
    <FieldShell id={id} label={label} hint={hint} error={error} className={className}>
      <select id={id} value={value} onChange={(e) => onValue(e.target.value)} aria-invalid={error ? true : undefined} aria-describedby={describedBy(id, hint, error)} {...rest}>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </FieldShell>
  );
}

export function CheckboxField({ label, hint, checked, onChecked, disabled }: { label: string; hint?: ReactNode; checked: boolean; onChecked: (v: boolean) => void; disabled?: boolean }) {
  const id = useId();
  return (
    <div className="field field-check">
      <input id={id} type="checkbox" checked={checked} disabled={disabled} onChange={(e) => onChecked(e.target.checked)} aria-describedby={hint ? `${id}-hint` : undefined} />
      <label htmlFor={id}>{label}</label>
      {hint ? (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
    </div>
  );
}

export function Tabs<T extends string>({ tabs, value, onValue, label }: { tabs: Array<{ id: T; label: string }>; value: T; onValue: (v: T) => void; label: string }) {
  return (
    <div className="tabs" role="tablist" aria-label={label}>
      {tabs.map((t) => (
        <button key={t.id} type="button" role="tab" aria-selected={t.id === value} className={t.id === value ? 'tab active' : 'tab'} onClick={() => onValue(t.id)}>
          {t.label}
        </button>
      ))}
    </div>
  );
}

export function fmtTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function fmtBytes(n: number | undefined): string {
  if (n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** Agent ids, skill names, account ids: `[A-Za-z0-9_-]{1,64}`. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export function idProblem(value: string, what = 'id'): string | null {
  if (!value) return `${what} is required`;
  return ID_PATTERN.test(value) ? null : `${what}: letters, digits, _ and - only (1 to 64)`;
}

/** A search box over a list (filtered in the browser). */
export function SearchField({ label, value, onValue }: { label: string; value: string; onValue: (v: string) => void }) {
  const id = useId();
  return (
    <div className="field search-field">
      <label htmlFor={id} className="sr-only">
        {label}
      </label>
      <input id={id} type="search" placeholder={`${label}…`} value={value} onChange={(e) => onValue(e.target.value)} />
    </div>
  );
}

/** A long operation under way: an indeterminate bar with what it is and how long it has taken. */
export function Progress({ label, since }: { label: string; since: number }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(t);
  }, []);
  const seconds = Math.max(0, (now - since) / 1000);
  return (
    <div className="progress" role="status">
      <progress aria-label={label} />
      <span>
        {label}… {seconds.toFixed(1)} s
      </span>
    </div>
  );
}

/** Why the viewer may not use a control (its `title`, and said in words next to it). */
export function Why({ reason }: { reason: string | null }) {
  return reason ? <span className="why muted">{reason}</span> : null;
}
