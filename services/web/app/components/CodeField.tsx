import { Suspense, lazy, useId, type MouseEvent, type ReactNode } from 'react';
import type { CodeProblem } from '../lib/code-lines';
import { FieldShell, describedBy } from './ui';
import type { CodeEditorProps } from './CodeEditor';

// CodeMirror is its own chunk: pages load it when they first show code.
const CodeEditor = lazy(() => import('./CodeEditor'));

export interface CodeFieldProps {
  label: string;
  hint?: ReactNode;
  error?: string | null | undefined;
  className?: string | undefined;
  language: CodeEditorProps['language'];
  value: string;
  onValue: (text: string) => void;
  problems?: readonly CodeProblem[] | undefined;
  reveal?: { at: number } | null | undefined;
  rows?: number;
}

/**
 * A labelled code field: CodeMirror (components/CodeEditor.tsx) once its chunk is in, a plain
 * text box with the same text until then, so the field works from the first moment.
 */
export function CodeField({ label, hint, error, className, language, value, onValue, problems, reveal, rows = 8 }: CodeFieldProps) {
  const id = useId();
  const described = describedBy(id, hint, error);
  const fallback = <textarea id={id} className="code-fallback" rows={rows} spellCheck={false} value={value} onChange={(e) => onValue(e.target.value)} aria-describedby={described} aria-invalid={error ? true : undefined} />;
  // The label moves the focus into the editor (a contenteditable no `for` can name).
  const focusEditor = (e: MouseEvent<HTMLLabelElement>) => (e.currentTarget.parentElement?.querySelector('.cm-content') as HTMLElement | null)?.focus();
  return (
    <FieldShell id={id} label={label} hint={hint} error={error} className={`code-field${className ? ` ${className}` : ''}`} labelProps={{ id: `${id}-label`, onClick: focusEditor }}>
      <Suspense fallback={fallback}>
        <CodeEditor labelId={`${id}-label`} describedBy={described} language={language} value={value} onValue={onValue} problems={problems} invalid={Boolean(error)} reveal={reveal} />
      </Suspense>
    </FieldShell>
  );
}
