import { useMemo, useState } from 'react';
import type { ToolForms } from '@agentry/client';
import { AGENT_FIELD_HINTS, agentConfigSchema, fieldErrorsOf } from '../lib/agent-form';
import { COMMON_RELATIONS, type ChainGraph, type DslNode, type GraphEdge, type GraphNode } from '../lib/chain-graph';
import { parseSteps, type Replay, type RunStep } from '../lib/chain-replay';
import { clientProblems, fieldIds, fieldsOf, type JsonSchema } from '../lib/schema-form';
import { RunPicker } from './RunPicker';
import { SchemaForm } from './SchemaForm';
import { CheckboxField, ErrorText, Notice, SelectField, TextArea, TextField } from './ui';

/**
 * The panels beside the rule-chain canvas (components/ChainCanvas.tsx): the selected node's name,
 * start flag and configuration (the same generated form as the Settings tab, from the node type's
 * schema in `GET /tools/forms`), the selected connection's relation, and the run replay.
 */

/** A text field for a relation name with the common ones offered (a `jsSwitch` may return any name). */
export function RelationInput({ id, label, value, onValue }: { id: string; label: string; value: string; onValue: (v: string) => void }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} list={`${id}-list`} value={value} onChange={(e) => onValue(e.target.value)} spellCheck={false} />
      <datalist id={`${id}-list`}>
        {COMMON_RELATIONS.map((r) => (
          <option key={r} value={r} />
        ))}
      </datalist>
    </div>
  );
}

/** The configuration schema of a node type, with what the Settings tab adds for `ai/agent`. */
function useNodeFields(forms: ToolForms, type: string) {
  return useMemo(() => {
    const schema = forms.nodes.find((n) => n.type === type)?.configuration as JsonSchema | undefined;
    if (!schema) return null;
    return type === 'ai/agent' ? fieldsOf(agentConfigSchema(schema), AGENT_FIELD_HINTS) : fieldsOf(schema);
  }, [forms, type]);
}

export interface NodeInspectorProps {
  node: GraphNode;
  graph: ChainGraph;
  forms: ToolForms;
  problems: string[];
  onEdit: (edit: (doc: DslNode) => DslNode) => void;
  onStart: () => void;
  /** A connection from this node (the way without dragging: keyboard, small touch screens). */
  onConnect: (target: string, relation: string) => void;
  onDelete: () => void;
}

export function NodeInspector({ node, graph, forms, problems, onEdit, onStart, onConnect, onDelete }: NodeInspectorProps) {
  const fields = useNodeFields(forms, node.type);
  const config = (node.doc.configuration ?? {}) as Record<string, unknown>;
  const ids = useMemo(() => (fields ? fieldIds(fields) : []), [fields]);
  // The gateway's problems of this node at the field they name; the rest listed above the form.
  const placed = useMemo(() => (problems.length ? fieldErrorsOf(problems.join('; '), node.id, ids) : { fields: {}, other: [] }), [problems, node.id, ids]);
  const errors = useMemo(() => ({ ...(fields ? clientProblems(fields, config) : {}), ...placed.fields }), [fields, config, placed]);
  const description = forms.nodes.find((n) => n.type === node.type)?.description;
  return (
    <section className="canvas-panel" aria-label={`Node ${node.id}`}>
      <h3>
        Node <code>{node.id}</code> <span className="badge">{node.type}</span>
      </h3>
      {description ? <p className="muted">{description}</p> : null}
      {placed.other.length > 0 ? (
        <div className="error-text" role="alert">
          <ul>
            {placed.other.map((p) => (
              <li key={p}>{p}</li>
            ))}
          </ul>
        </div>
      ) : null}
      <TextField label="Node name" value={node.doc.name ?? ''} onValue={(v) => onEdit((d) => ({ ...d, name: v }))} />
      <CheckboxField label="The run starts here" checked={graph.firstId === node.id} disabled={graph.firstId === node.id} onChecked={(on) => on && onStart()} />
      {fields ? (
        <SchemaForm fields={fields} value={config} errors={errors} onChange={(next) => onEdit((d) => ({ ...d, configuration: next }))} />
      ) : (
        <Notice kind="warn">This server describes no configuration for {node.type}; edit it in the DSL (JSON) tab.</Notice>
      )}
      <ConnectFrom node={node} graph={graph} onConnect={onConnect} />
      <div className="form-actions">
        <button type="button" className="danger" onClick={onDelete}>
          Delete node
        </button>
      </div>
    </section>
  );
}

function ConnectFrom({ node, graph, onConnect }: { node: GraphNode; graph: ChainGraph; onConnect: (target: string, relation: string) => void }) {
  const [target, setTarget] = useState('');
  const [relation, setRelation] = useState('Success');
  const targets = graph.nodes.filter((n) => n.id !== node.id);
  if (targets.length === 0) return null;
  return (
    <fieldset className="field wide">
      <legend>Connect to another node</legend>
      <SelectField label="To node" value={target} onValue={setTarget} options={[{ value: '', label: '(choose)' }, ...targets.map((n) => ({ value: n.id, label: n.doc.name && n.doc.name !== n.id ? `${n.doc.name} (${n.id})` : n.id }))]} />
      <RelationInput id={`connect-${node.id}`} label="With relation" value={relation} onValue={setRelation} />
      <button type="button" className="secondary" disabled={!target || !relation.trim()} onClick={() => onConnect(target, relation.trim())}>
        Connect
      </button>
    </fieldset>
  );
}

export function EdgeInspector({ edge, problems, onRelation, onDelete }: { edge: GraphEdge; problems: string[]; onRelation: (r: string) => void; onDelete: () => void }) {
  return (
    <section className="canvas-panel" aria-label="Connection">
      <h3>
        Connection <code>{edge.source}</code> → <code>{edge.target}</code>
      </h3>
      <ErrorText error={problems.length ? problems.join('\n') : null} />
      <RelationInput id={`relation-${edge.id}`} label="Relation" value={edge.relation} onValue={onRelation} />
      <p className="hint">The message goes this way when the node returns this relation (exact, case-sensitive).</p>
      <div className="form-actions">
        <button type="button" className="danger" onClick={onDelete}>
          Delete connection
        </button>
      </div>
    </section>
  );
}

/**
 * Pick one of the agent's recent runs (`agentId`: the canvas edits an agent), or paste a run's
 * steps (the engine's chain trace: `[{nodeId, relations, ms, error?}]`), and see them on the canvas.
 */
export function ReplayPanel({ agentId, replay, steps, onSteps }: { agentId?: string; replay: Replay | null; steps: RunStep[]; onSteps: (steps: RunStep[] | null) => void }) {
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
    onSteps(parsed.steps);
  };
  return (
    <details className="canvas-panel" open={replay !== null}>
      <summary>Replay a run</summary>
      {agentId ? <RunPicker agentId={agentId} onSteps={onSteps} /> : null}
      <TextArea label="Run steps (JSON)" rows={5} spellCheck={false} value={text} onValue={setText} error={problem} hint="A run's recorded steps: a list of {nodeId, relations, ms, error?}, one per node execution, as the engine's chain trace writes them." />
      <div className="form-actions">
        <button type="button" onClick={show} disabled={!text.trim()}>
          Replay
        </button>
        {replay ? (
          <button type="button" className="secondary" onClick={() => onSteps(null)}>
            Clear replay
          </button>
        ) : null}
      </div>
      {replay ? (
        <>
          <p aria-live="polite">
            {steps.length} steps, {replay.totalMs} ms in all{replay.unknown.length ? `; not in this chain: ${replay.unknown.join(', ')}` : ''}.
          </p>
          <ol className="replay-steps">
            {steps.map((s, i) => (
              <li key={i} className={s.error ? 'failed' : undefined}>
                <code>{s.nodeId}</code> {s.relations.length ? `→ ${s.relations.join(', ')}` : '(end)'}, {s.ms} ms{s.error ? `: ${s.error}` : ''}
                {s.debug && 'redacted' in s.debug ? (
                  <span className="hint"> (messages hidden: another person's conversation)</span>
                ) : s.debug ? (
                  <details>
                    <summary>Message in and out</summary>
                    <pre>{JSON.stringify(s.debug, null, 2)}</pre>
                  </details>
                ) : null}
              </li>
            ))}
          </ol>
        </>
      ) : null}
    </details>
  );
}
