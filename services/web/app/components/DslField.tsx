import { useMemo, useState } from 'react';
import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { chainGraph } from '../lib/chain-graph';
import { chainIssues } from '../lib/chain-validate';
import { lineOf, placeProblems, type PlacedProblem } from '../lib/code-lines';
import { CodeField } from './CodeField';

/**
 * The DSL (JSON) tab's editor: the whole chain as JSON in CodeMirror, with every problem on its
 * line as you type (a syntax error; the canvas's checks from the node types' schemas; the last
 * save's problems or warnings, by the path the gateway names) and listed below by line, each a
 * button that puts the cursor there.
 */
export function DslField({ text, onText, forms, saveProblems, saveFailed, error }: { text: string; onText: (t: string) => void; forms: ToolForms; saveProblems: readonly string[]; saveFailed: boolean; error: string | null }) {
  const [reveal, setReveal] = useState<{ at: number } | null>(null);
  const problems = useMemo(() => {
    const all: PlacedProblem[] = saveProblems.map((p) => ({ text: p, severity: saveFailed ? 'error' : 'warning' }));
    try {
      const dsl = JSON.parse(text) as RuleChainDsl;
      if (Array.isArray(dsl?.metadata?.nodes)) for (const i of chainIssues(chainGraph(dsl), forms)) all.push({ text: i.text, severity: i.blocker ? 'error' : 'warning', nodeId: i.nodeId });
    } catch {
      // A syntax error: placeProblems shows it alone.
    }
    return placeProblems(text, all);
  }, [text, forms, saveProblems, saveFailed]);
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
