import { useState } from 'react';
import type { Page, RunSteps, RunSummary } from '@agentry/client';
import { api, messageOf } from '../lib/api';
import { parseSteps, type RunStep } from '../lib/chain-replay';
import { useLoad } from '../lib/hooks';
import { ErrorText, SelectField } from './ui';

/** How many recent runs the picker lists (one page of `GET /agents/{id}/runs`). */
const RECENT = 50;

function runLabel(r: RunSummary): string {
  const when = new Date(r.createdAt).toLocaleString();
  return `${when} · ${r.status} · ${r.source}${r.durationMs !== null ? ` · ${r.durationMs} ms` : ''}`;
}

/**
 * The agent's recent runs that recorded steps (those that ran as a chain), newest first; the
 * chosen one's steps (`GET /runs/{runId}/steps`) are handed to the replay. Runs of a lone
 * ai/agent node have none and are not offered.
 */
export function RunPicker({ agentId, onSteps }: { agentId: string; onSteps: (steps: RunStep[]) => void }) {
  const runs = useLoad(() => api.get<Page<RunSummary>>(`/agents/${encodeURIComponent(agentId)}/runs?size=${RECENT}`), [agentId]);
  const [chosen, setChosen] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const withSteps = (runs.data?.data ?? []).filter((r) => r.hasSteps);
  const runId = chosen || withSteps[0]?.id || '';
  const load = async () => {
    setBusy(true);
    try {
      const answer = await api.get<RunSteps>(`/runs/${encodeURIComponent(runId)}/steps`);
      const parsed = parseSteps(answer);
      if (!parsed.ok) return setProblem(parsed.problem);
      setProblem(null);
      onSteps(parsed.steps);
    } catch (err) {
      setProblem(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  if (runs.error) return <ErrorText error={`Recent runs could not be loaded: ${runs.error}`} />;
  return (
    <div className="run-picker">
      <SelectField
        label="Recent run"
        value={runId}
        onValue={setChosen}
        disabled={withSteps.length === 0}
        options={withSteps.length ? withSteps.map((r) => ({ value: r.id, label: runLabel(r) })) : [{ value: '', label: runs.loading ? 'Loading…' : 'No run of this agent recorded steps yet' }]}
        hint="Runs that went through the chain record which node ran, with which relation and how long (and, with debugMode, the messages)."
        error={problem}
      />
      <div className="form-actions">
        <button type="button" onClick={() => void load()} disabled={!runId || busy}>
          Replay run
        </button>
        <button type="button" className="secondary" onClick={runs.reload} disabled={runs.loading}>
          Refresh runs
        </button>
      </div>
    </div>
  );
}
