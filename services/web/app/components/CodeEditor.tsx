import { useEffect, useRef, type KeyboardEvent } from 'react';
import { basicSetup } from 'codemirror';
import { Compartment, EditorState, type Extension } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { javascript } from '@codemirror/lang-javascript';
import { json } from '@codemirror/lang-json';
import { lintGutter, setDiagnostics, type Diagnostic } from '@codemirror/lint';
import type { CodeProblem } from '../lib/code-lines';

/**
 * A CodeMirror 6 editor for a script or the DSL: highlighting, line numbers, brackets, search,
 * and problems on their line (the lint gutter and underline). Its own chunk (see LazyCodeEditor):
 * CodeMirror is loaded only when a page shows code.
 *
 * Keyboard: Tab is not bound (it moves focus on, as in any field; indentation comes with Enter),
 * and Escape leaves the editor for the next control, unless it closes one of CodeMirror's own
 * popups first (completion, search).
 */

export interface CodeEditorProps {
  /** The label element's id: the editor has no form control a `<label for>` could name. */
  labelId: string;
  describedBy?: string | undefined;
  language: 'javascript' | 'json';
  value: string;
  onValue: (text: string) => void;
  problems?: readonly CodeProblem[] | undefined;
  invalid?: boolean | undefined;
  /** Moves the cursor to this offset and focuses the editor (a new object each time). */
  reveal?: { at: number } | null | undefined;
}

const THEME = EditorView.theme({
  '&': { fontSize: '0.85rem', border: '1px solid var(--border)', borderRadius: '6px', background: 'var(--panel)' },
  '&.cm-focused': { outline: '3px solid var(--focus)', outlineOffset: '1px' },
  '.cm-scroller': { minHeight: '6rem', maxHeight: '32rem' },
  '.cm-gutters': { background: 'var(--code-bg)', color: 'var(--muted)', borderRight: '1px solid var(--border)' },
});

/**
 * The gateway's Content-Security-Policy allows no inline style, and CodeMirror's styles (style-mod)
 * go into a `<style>` element when the view's root is a Document, which Chromium then refuses
 * (an unstyled editor and a console error). For a root without a `head` (a shadow root) style-mod
 * uses a constructed stylesheet (`adoptedStyleSheets`), which CSP allows. So the view gets the
 * document seen without its `head`; everything else it asks of its root goes to the document.
 */
const STYLE_ROOT: Document = new Proxy(document, {
  get(target, key) {
    if (key === 'head') return null;
    const value: unknown = Reflect.get(target, key, target);
    return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
  },
  set: (target, key, value) => Reflect.set(target, key, value, target),
});

/**
 * Text typed over a selection, put in by CodeMirror rather than by Chromium: Chromium's own edit
 * keeps the look of the highlighted text it replaced by writing it onto the line as a `style`
 * attribute, which the same CSP refuses (a console error at every keystroke that follows).
 * The editor's input handlers (closing brackets) still see the text first.
 */
const TYPE_OVER_SELECTION = EditorView.domEventHandlers({
  beforeinput(event, view) {
    const { state } = view;
    const text = event.data;
    if (event.inputType !== 'insertText' || !text || event.isComposing || state.selection.ranges.every((r) => r.empty)) return false;
    event.preventDefault();
    const { from, to } = state.selection.main;
    const insert = () => state.update(state.replaceSelection(text), { userEvent: 'input.type', scrollIntoView: true });
    if (!state.facet(EditorView.inputHandler).some((handle) => handle(view, from, to, text, insert))) view.dispatch(insert());
    return true;
  },
});

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [contenteditable="true"], [tabindex]:not([tabindex="-1"])';

/** The first focusable element after `el` in the page (where Escape sends the focus). */
function nextFocusable(el: HTMLElement): HTMLElement | undefined {
  return Array.from(document.querySelectorAll<HTMLElement>(FOCUSABLE)).find((c) => !el.contains(c) && el.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING && c.offsetParent !== null);
}

function diagnosticsOf(problems: readonly CodeProblem[], length: number): Diagnostic[] {
  return problems.map((p) => {
    const from = Math.max(0, Math.min(p.from, length));
    return { from, to: Math.max(from, Math.min(p.to, length)), severity: p.severity, message: p.message };
  });
}

function attributesOf({ labelId, describedBy, invalid }: Pick<CodeEditorProps, 'labelId' | 'describedBy' | 'invalid'>): Extension {
  return EditorView.contentAttributes.of({ 'aria-labelledby': labelId, ...(describedBy ? { 'aria-describedby': describedBy } : {}), ...(invalid ? { 'aria-invalid': 'true' } : {}) });
}

export default function CodeEditor({ labelId, describedBy, language, value, onValue, problems = [], invalid, reveal }: CodeEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const attributes = useRef(new Compartment());
  const latest = useRef(onValue);
  latest.current = onValue;

  useEffect(() => {
    const extensions: Extension[] = [
      basicSetup,
      language === 'json' ? json() : javascript(),
      lintGutter(),
      THEME,
      TYPE_OVER_SELECTION,
      EditorView.lineWrapping,
      attributes.current.of(attributesOf({ labelId, describedBy, invalid })),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) latest.current(u.state.doc.toString());
      }),
    ];
    const v = new EditorView({ parent: host.current as HTMLDivElement, root: STYLE_ROOT, state: EditorState.create({ doc: value, extensions }) });
    view.current = v;
    return () => {
      v.destroy();
      view.current = null;
    };
    // The editor is made once per language; text, labels and problems follow below.
  }, [language]);

  useEffect(() => {
    view.current?.dispatch({ effects: attributes.current.reconfigure(attributesOf({ labelId, describedBy, invalid })) });
  }, [labelId, describedBy, invalid]);

  // A value from outside (another tab, a save's answer) replaces the text; our own echo does not.
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  useEffect(() => {
    const v = view.current;
    if (v) v.dispatch(setDiagnostics(v.state, diagnosticsOf(problems, v.state.doc.length)));
  }, [problems, value]);

  useEffect(() => {
    const v = view.current;
    if (!v || !reveal) return;
    const at = Math.min(reveal.at, v.state.doc.length);
    v.dispatch({ selection: { anchor: at }, scrollIntoView: true });
    v.focus();
  }, [reveal]);

  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    // Handled by CodeMirror (a popup closed): the editor keeps the focus.
    if (e.key !== 'Escape' || e.defaultPrevented || !host.current) return;
    nextFocusable(host.current)?.focus();
  };
  return <div ref={host} className={`code-editor${invalid ? ' has-error' : ''}`} data-language={language} onKeyDown={onKeyDown} />;
}
