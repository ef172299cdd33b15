import { useEffect, useMemo, useState } from 'react';
import type { ToolForms } from '@agentry/client';
import type { SaveProblem } from '../lib/chain-graph';
import { textIssues } from '../lib/chain-validate';
import { lineOf, placeProblems, type PlacedProblem } from '../lib/code-lines';
import { CodeField } from './CodeField';

/**
 * The DSL (JSON) tab's editor: the whole chain as JSON in CodeMirror, with every problem on its
 * line as you type (a syntax error; the canvas's checks from the node types' schemas; the last
 * save's problems or warnings, by the path the gateway names) and listed below by line, each a
 * button that puts the cursor there. `focusNode` (a blocker of Save clicked) puts it on that node.
 */
export function DslField(props: { text: string; onText: (t: string) => void; forms: ToolForms; saveProblems: readonly SaveProblem[]; saveFailed: boolean; error: string | null; focusNode?: { id: string } | null }) {
  const { text, onText, forms, saveProblems, saveFailed, error, focusNode } = props;
  const [reveal, setReveal] = useState<{ at: number } | null>(null);
  const problems = useMemo(() => {
    // A syntax error: placeProblems shows it alone.
    const all: PlacedProblem[] = saveProblems.map((p) => ({ ...p, severity: saveFailed ? 'error' : 'warning' }));
    for (const i of textIssues(text, forms)) all.push({ text: i.text, severity: i.blocker ? 'error' : 'warning', nodeId: i.nodeId });
    return placeProblems(text, all);
  }, [text, forms, saveProblems, saveFailed]);
  useEffect(() => {
    const at = focusNode ? placeProblems(text, [{ text: '', severity: 'error', nodeId: focusNode.id }])[0]?.from : undefined;
    if (at !== undefined) setReveal({ at });
    // Only a new request moves the cursor, not the typing that follows it.
  }, [focusNode]);
  return (
    <>
      <CodeField
        label="Rule chain DSL"
        className="dsl-field"
        language="json"
        value={text}
        onValue={onText}
        problems={problems}
        reveal={reveal}
        error={error}
        rows={24}
        hint="The whole agent as stored: ruleChain, metadata.nodes and metadata.connections. Problems show on their line (Escape leaves the editor)."
      />
      {problems.length > 0 ? (
        <div className="dsl-problems" role="status">
          <ul aria-label="Problems in the DSL">
            {problems.map((p, i) => (
              <li key={`${p.from} ${i}`} className={p.severity === 'error' ? 'issue-blocker' : 'issue-note'}>
                <button type="button" className="link" onClick={() => setReveal({ at: p.from })}>
                  Line {lineOf(text, p.from)}
                </button>
                : {p.message}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </>
  );
}
