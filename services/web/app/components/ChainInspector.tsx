import { useMemo, useState } from 'react';
import type { ToolForms } from '@agentry/client';
import { AGENT_FIELD_HINTS, agentConfigSchema, fieldErrorsOf } from '../lib/agent-form';
import { COMMON_RELATIONS, type ChainGraph, type DslNode, type GraphEdge, type GraphNode } from '../lib/chain-graph';
import { clientProblems, fieldIds, fieldsOf, type JsonSchema } from '../lib/schema-form';
import { SchemaForm } from './SchemaForm';
import { CheckboxField, ErrorText, Notice, SelectField, TextField } from './ui';

/**
 * The panels beside the rule-chain canvas (components/ChainCanvas.tsx): the selected node's name,
 * start flag and configuration (the same generated form as the Settings tab, from the node type's
 * schema in `GET /tools/forms`) and the selected connection's relation (the run replay is
 * components/RunReplay.tsx).
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
