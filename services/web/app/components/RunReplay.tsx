import { useEffect, useRef, useState } from 'react';
import type { Page, RunSteps, RunSummary } from '@agentry/client';
import { api, messageOf } from '../lib/api';
import { fmtMs, parseSteps, stepFailed, stepOfNode, type Replay, type RunStep } from '../lib/chain-replay';
import { useLoad } from '../lib/hooks';
import { ErrorText, Notice, TextArea } from './ui';

/**
 * The replay beside the canvas, read like a debugger: the agent's recent runs by what they were
 * asked and how they ended, the chosen run's steps (node, status, relation, time), and one step's
 * message in and out. The canvas colours the nodes (components/ChainCanvas.tsx).
 */

/** A run on the canvas: its steps, and what the run list said of it (none for pasted steps). */
export interface ReplayedRun {
  steps: RunStep[];
  id?: string;
  status?: string;
  error?: string | null;
  words?: string;
}

/** How many recent runs the list shows (one page of `GET /agents/{id}/runs`). */
const RECENT = 50;

/** The run statuses people read: a succeeded run is "ok". */
const STATUS_WORDS: Record<string, string> = { succeeded: 'ok', failed: 'failed', cancelled: 'cancelled', running: 'running', queued: 'queued' };

function StatusBadge({ status }: { status: string }) {
  return <span className={`badge status-${status}`}>{STATUS_WORDS[status] ?? status}</span>;
}

/** What a run answered, as the list names it; the gateway leaves it out of another person's run. */
function runWords(r: { firstWords?: string }): string {
  if (r.firstWords === undefined) return "(another person's conversation)";
  return r.firstWords.trim() || '(no message)';
}

function runWhen(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** The agent's recent runs that recorded steps (those that ran as a chain), newest first; a click replays one. */
function RunList({ agentId, current, onRun }: { agentId: string; current: string | undefined; onRun: (run: ReplayedRun) => void }) {
  const runs = useLoad(() => api.get<Page<RunSummary>>(`/agents/${encodeURIComponent(agentId)}/runs?size=${RECENT}`), [agentId]);
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const withSteps = (runs.data?.data ?? []).filter((r) => r.hasSteps);
  const load = async (r: RunSummary) => {
    setBusy(r.id);
    try {
      const parsed = parseSteps(await api.get<RunSteps>(`/runs/${encodeURIComponent(r.id)}/steps`));
      if (!parsed.ok) return setProblem(parsed.problem);
      setProblem(null);
      onRun({ steps: parsed.steps, id: r.id, status: r.status, error: r.error, words: runWords(r) });
    } catch (err) {
      setProblem(`That run's steps could not be loaded: ${messageOf(err)}`);
    } finally {
      setBusy(null);
    }
  };
  if (runs.error) return <ErrorText error={`Recent runs could not be loaded: ${runs.error}`} />;
  return (
    <div className="run-list-wrap">
      <div className="run-list-head">
        <h3 id="recent-runs">Recent runs</h3>
        <button type="button" className="secondary" onClick={runs.reload} disabled={runs.loading}>
          Refresh
        </button>
      </div>
      {withSteps.length === 0 ? (
        <p className="hint">{runs.loading ? 'Loading…' : 'No run of this agent went through its chain yet: chat with it, then Refresh.'}</p>
      ) : (
        <ul className="run-list stack-list" aria-labelledby="recent-runs">
          {withSteps.map((r) => (
            <li key={r.id}>
              <button type="button" className={`run-item status-${r.status}`} aria-current={r.id === current ? 'true' : undefined} disabled={busy !== null} onClick={() => void load(r)} title={r.error ?? undefined}>
                <StatusBadge status={r.status} />
                <span className="run-words">{runWords(r)}</span>
                <span className="run-meta">
                  {runWhen(r.createdAt)} · {r.source}
                  {r.durationMs !== null ? ` · ${fmtMs(r.durationMs)}` : ''}
                </span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <ErrorText error={problem} />
    </div>
  );
}

function StepList({ steps, shown, onChoose }: { steps: RunStep[]; shown: number | undefined; onChoose: (i: number) => void }) {
  const longest = Math.max(...steps.map((s) => s.ms), 0.001);
  return (
    <ol className="replay-steps stack-list" aria-label="Steps of the run">
      {steps.map((s, i) => {
        const failed = stepFailed(s);
        return (
          <li key={i} className={failed ? 'failed' : 'ok'}>
            <button type="button" aria-current={i === shown ? 'step' : undefined} onClick={() => onChoose(i)}>
              <span className="step-no">#{i + 1}</span>
              <code className="step-node">{s.nodeId}</code>
              <span className={`badge status-${failed ? 'failed' : 'succeeded'}`}>{failed ? 'failed' : 'ok'}</span>
              <span className="step-ms">{fmtMs(s.ms)}</span>
              <span className="step-rel">
                {s.type ?? ''} {s.relations.length ? `→ ${s.relations.join(', ')}` : '(end)'}
              </span>
              {/* Where the time went: each step's bar against the slowest. */}
              <span className="step-bar" aria-hidden="true">
                <span style={{ width: `${Math.max(2, (s.ms / longest) * 100)}%` }} />
              </span>
              {s.error ? <span className="step-error">{s.error}</span> : null}
            </button>
          </li>
        );
      })}
    </ol>
  );
}

function json(value: unknown): string {
  return value === undefined ? '(none)' : JSON.stringify(value, null, 2);
}

/** One step's node, outcome and time, and the message it got and passed on when the run kept them. */
function StepDetail({ step, index }: { step: RunStep; index: number }) {
  const failed = stepFailed(step);
  const box = useRef<HTMLElement>(null);
  const first = useRef(true);
  // Another step clicked: its messages brought into sight in the panel (not on first show, which keeps the run list in view).
  useEffect(() => {
    if (first.current) first.current = false;
    else box.current?.scrollIntoView({ block: 'nearest' });
  }, [index]);
  return (
    <section ref={box} className={failed ? 'step-detail failed' : 'step-detail'} aria-label="Step detail">
      <h4>
        Step #{index + 1}: <code>{step.nodeId}</code> <StatusBadge status={failed ? 'failed' : 'succeeded'} />
      </h4>
      <p className="muted">
        {step.type ?? 'node'} · {step.relations.length ? `went along ${step.relations.join(', ')}` : 'ended the chain'} · {fmtMs(step.ms)}
      </p>
      {step.error ? <p className="step-error" role="alert">{step.error}</p> : null}
      {step.debug && 'redacted' in step.debug ? (
        <Notice>Its input and output are hidden: this run is another person&apos;s conversation.</Notice>
      ) : step.debug ? (
        <>
          <h5>Input</h5>
          <pre className="step-message">{json(step.debug.in)}</pre>
          <h5>Output</h5>
          <pre className="step-message">{failed && step.debug.out === undefined ? '(none: the node failed)' : json(step.debug.out)}</pre>
        </>
      ) : (
        <p className="hint">
          Input and output were not kept: this node ran without <code>debugMode</code>. Set <code>&quot;debugMode&quot;: true</code> on the node (DSL tab) and run again to keep them.
        </p>
      )}
    </section>
  );
}

/** A run's steps pasted as JSON (the engine's chain trace): for a rule chain, or a run you may not list. */
function PasteSteps({ open, onRun }: { open: boolean; onRun: (run: ReplayedRun) => void }) {
  const [text, setText] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const show = () => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return setProblem('not valid JSON');
    }
    const parsed = parseSteps(value);
    if (!parsed.ok) return setProblem(parsed.problem);
    setProblem(null);
    onRun({ steps: parsed.steps });
  };
  return (
    <details className="replay-paste" open={open}>
      <summary>Paste a run&apos;s steps</summary>
      <TextArea label="Run steps (JSON)" rows={4} spellCheck={false} value={text} onValue={setText} error={problem} hint="A run's recorded steps: a list of {nodeId, relations, ms, error?}, one per node execution, as the engine's chain trace writes them." />
      <div className="form-actions">
        <button type="button" onClick={show} disabled={!text.trim()}>
          Replay
        </button>
      </div>
    </details>
  );
}

export interface ReplayPanelProps {
  /** The agent the canvas edits, when the caller may list its runs. */
  agentId?: string;
  run: ReplayedRun | null;
  replay: Replay | null;
  onRun: (run: ReplayedRun | null) => void;
  /** The step last clicked in the list, or null. */
  chosen: number | null;
  onChoose: (index: number) => void;
  /** The one node selected on the canvas: its step is shown. */
  selectedNode: string | undefined;
}

/** Which step the detail shows: the selected node's, else the one clicked, else the first failure, else the first. */
function shownStep({ run, chosen, selectedNode }: ReplayPanelProps): number | undefined {
  const steps = run?.steps ?? [];
  if (steps.length === 0) return undefined;
  if (selectedNode !== undefined) return stepOfNode(steps, selectedNode, chosen);
  if (chosen !== null && chosen < steps.length) return chosen;
  const failed = steps.findIndex(stepFailed);
  return failed >= 0 ? failed : 0;
}

export function ReplayPanel(props: ReplayPanelProps) {
  const { agentId, run, replay, onRun, onChoose, selectedNode } = props;
  const shown = shownStep(props);
  return (
    <section className="canvas-panel replay-panel" aria-label="Replay">
      {agentId ? <RunList agentId={agentId} current={run?.id} onRun={onRun} /> : null}
      {run && replay ? (
        <div className="replay-run">
          <div className="replay-head">
            {run.status ? <StatusBadge status={run.status} /> : null}
            <span aria-live="polite">
              {run.steps.length} steps, {fmtMs(replay.totalMs)} in all{replay.unknown.length ? `; not in this chain: ${replay.unknown.join(', ')}` : ''}.
            </span>
            <button type="button" className="link-button" onClick={() => onRun(null)}>
              Clear replay
            </button>
          </div>
          {run.words ? <p className="replay-words">{run.words}</p> : null}
          {run.status === 'failed' && run.error ? <p className="step-error">The run failed: {run.error}</p> : null}
          <StepList steps={run.steps} shown={shown} onChoose={onChoose} />
          {shown !== undefined ? (
            <StepDetail step={run.steps[shown]!} index={shown} />
          ) : selectedNode !== undefined ? (
            <p className="hint">
              Node <code>{selectedNode}</code> did not run in this run.
            </p>
          ) : null}
        </div>
      ) : agentId ? (
        <p className="hint">Pick a run to see which nodes it went through, how long each took, and (with debugMode) what each one got and passed on.</p>
      ) : null}
      <PasteSteps open={!agentId} onRun={onRun} />
    </section>
  );
}
