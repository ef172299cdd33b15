import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { Background, Controls, Handle, MarkerType, Position, ReactFlow, ReactFlowProvider, applyNodeChanges, useReactFlow, type Connection, type Edge, type Node, type NodeChange, type NodeProps } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import './chain-canvas.css';
import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { addNode, chainDsl, chainGraph, connect, editNode, moveNodes, nextPosition, problemsByElement, removeElements, setRelation, type ChainGraph, type Point } from '../lib/chain-graph';
import { replayOf, type NodeReplay, type RunStep } from '../lib/chain-replay';
import { EdgeInspector, NodeInspector, RelationInput, ReplayPanel } from './ChainInspector';
import { SelectField } from './ui';

/**
 * The rule chain drawn (`@xyflow/react`): nodes and relation-labelled connections from the DSL,
 * nodes added from the node types of `GET /tools/forms`, connections drawn by dragging from a
 * node's right handle to another's left one (with the relation chosen above the canvas), the
 * gateway's problems on the node they name, and a run's steps replayed on it. The DSL stays the
 * truth: every edit goes out through `onChange` as the DSL (lib/chain-graph.ts), so Save, the
 * JSON tab and this canvas share one draft, and a chain nobody edited here is saved unchanged.
 */

export interface ChainCanvasProps {
  dsl: RuleChainDsl;
  forms: ToolForms;
  /** The last save's problems (the 400 split), or none. */
  problems: readonly string[];
  onChange: (next: RuleChainDsl) => void;
  /** The agent the chain is (its recent runs can be replayed); none for a rule chain. */
  agentId?: string;
}

interface RuleNodeData extends Record<string, unknown> {
  type: string;
  name: string;
  start: boolean;
  problems: string[];
  replay: NodeReplay | undefined;
  replaying: boolean;
}
type RuleFlowNode = Node<RuleNodeData, 'rule'>;
type Selection = { kind: 'node' | 'edge'; id: string } | null;

function RuleNode({ id, data, selected }: NodeProps<RuleFlowNode>) {
  const ran = data.replay;
  const cls = ['canvas-node', selected ? 'selected' : '', data.problems.length ? 'has-problem' : '', data.replaying ? (ran ? (ran.error ? 'ran failed' : 'ran') : 'not-run') : ''].filter(Boolean).join(' ');
  return (
    <div className={cls} data-node-id={id}>
      <Handle type="target" position={Position.Left} aria-label={`into ${id}`} />
      <div className="canvas-node-type">
        {data.type}
        {data.start ? <span className="badge ok">start</span> : null}
      </div>
      <div className="canvas-node-name">{data.name || id}</div>
      {data.name && data.name !== id ? <div className="canvas-node-id">{id}</div> : null}
      {ran ? (
        <div className="canvas-node-run">
          #{ran.order.join(', #')} · {ran.relations.join(', ') || 'end'} · {ran.ms} ms
        </div>
      ) : null}
      {data.problems.length ? (
        <div className="canvas-node-problem" role="alert">
          {data.problems.map((p) => (
            <div key={p}>{p.replace(/^(?:.*?: )?metadata\.nodes\[\d+\](?: \("[^"]*"\))?,?\s*/, '')}</div>
          ))}
        </div>
      ) : null}
      <Handle type="source" position={Position.Right} aria-label={`out of ${id}`} />
    </div>
  );
}

const NODE_TYPES = { rule: RuleNode };
// Small chains are shown at their size rather than blown up; larger ones are zoomed out to fit.
const FIT = { padding: 0.2, maxZoom: 1 };

/** The graph of the draft, redrawn when the draft changes from outside (the JSON tab, a save's answer). */
function useCanvasGraph(dsl: RuleChainDsl, onChange: (next: RuleChainDsl) => void) {
  const [graph, setGraph] = useState<ChainGraph>(() => chainGraph(dsl));
  const emitted = useRef<RuleChainDsl | null>(null);
  useEffect(() => {
    if (dsl !== emitted.current) setGraph(chainGraph(dsl));
  }, [dsl]);
  // Once edited here, every node's position is written (RuleGo's additionalInfo.layoutX/Y).
  const emit = useCallback(
    (next: ChainGraph) => {
      setGraph(next);
      const out = chainDsl(dsl, next, { positions: true });
      emitted.current = out;
      onChange(out);
    },
    [dsl, onChange],
  );
  return { graph, emit };
}

function flowEdges(graph: ChainGraph, selection: Selection, followed: ReadonlySet<string> | null, problems: Record<string, string[]>): Edge[] {
  return graph.edges.map((e) => ({
    id: e.id,
    source: e.source,
    target: e.target,
    label: e.relation,
    selected: selection?.kind === 'edge' && selection.id === e.id,
    markerEnd: { type: MarkerType.ArrowClosed },
    animated: followed?.has(e.id) ?? false,
    className: [followed ? (followed.has(e.id) ? 'followed' : 'not-followed') : '', problems[e.id] ? 'has-problem' : ''].filter(Boolean).join(' '),
    data: { relation: e.relation },
  }));
}

function CanvasToolbar({ forms, onAdd, relation, onRelation }: { forms: ToolForms; onAdd: (type: string) => void; relation: string; onRelation: (r: string) => void }) {
  const [type, setType] = useState(forms.nodes[0]?.type ?? '');
  return (
    <div className="canvas-toolbar">
      <SelectField label="Node type" value={type} onValue={setType} options={forms.nodes.map((n) => ({ value: n.type, label: n.type }))} title={forms.nodes.find((n) => n.type === type)?.description} />
      <button type="button" onClick={() => onAdd(type)} disabled={!type}>
        Add node
      </button>
      <RelationInput id="canvas-new-relation" label="Relation of new connections" value={relation} onValue={onRelation} />
      <p className="hint">Drag from a node&apos;s right handle to another node&apos;s left handle to connect them.</p>
    </div>
  );
}

export function ChainCanvas(props: ChainCanvasProps) {
  return (
    <ReactFlowProvider>
      <ChainCanvasInner {...props} />
    </ReactFlowProvider>
  );
}

function ChainCanvasInner({ dsl, forms, problems, onChange, agentId }: ChainCanvasProps) {
  const { graph, emit } = useCanvasGraph(dsl, onChange);
  const [selection, setSelection] = useState<Selection>(null);
  const [relation, setRelationDraft] = useState('Success');
  const [steps, setSteps] = useState<RunStep[] | null>(null);
  const byElement = useMemo(() => problemsByElement(problems, graph), [problems, graph]);
  const replay = useMemo(() => (steps ? replayOf(graph, steps) : null), [graph, steps]);
  const flowNodes = useFlowNodes(graph, selection, byElement.nodes, replay, setSelection);
  const edges = useMemo(() => flowEdges(graph, selection, replay ? new Set(replay.edges) : null, byElement.edges), [graph, selection, replay, byElement.edges]);

  const flow = useReactFlow();
  const add = (type: string) => {
    const { graph: next, id } = addNode(graph, type, nextPosition(graph));
    emit(next);
    setSelection({ kind: 'node', id });
    // React Flow runs a fitView once the new node is measured, so the node is in sight.
    void flow.fitView(FIT);
  };
  const onConnect = (c: Connection) => emit(connect(graph, c.source, c.target, relation.trim() || 'Success'));
  const onDragStop = (_: unknown, _node: Node, dragged: Node[]) => emit(moveNodes(graph, new Map<string, Point>(dragged.map((n) => [n.id, n.position]))));
  const remove = (nodeIds: string[], edgeIds: string[]) => {
    emit(removeElements(graph, nodeIds, edgeIds));
    setSelection(null);
  };
  return (
    <div className="chain-canvas">
      <CanvasToolbar forms={forms} onAdd={add} relation={relation} onRelation={setRelationDraft} />
      {byElement.other.length ? (
        <div className="error-text" role="alert">
          <ul>
            {byElement.other.map((p) => (
              <li key={p}>{p}</li>
            ))}
          </ul>
        </div>
      ) : null}
      <div className="canvas-body">
        <div className="canvas-flow" role="application" aria-label="Rule chain canvas">
          <ReactFlow
            nodes={flowNodes.nodes}
            edges={edges}
            nodeTypes={NODE_TYPES}
            onNodesChange={flowNodes.onNodesChange}
            onNodeDragStop={onDragStop}
            onConnect={onConnect}
            onNodeClick={(_, n) => setSelection({ kind: 'node', id: n.id })}
            onEdgeClick={(_, e) => setSelection({ kind: 'edge', id: e.id })}
            onEdgesChange={(changes) => selectFrom(changes, 'edge', setSelection)}
            onPaneClick={() => setSelection(null)}
            onDelete={({ nodes, edges: gone }) => remove(nodes.map((n) => n.id), gone.map((e) => e.id))}
            deleteKeyCode="Delete"
            colorMode="system"
            fitView
            fitViewOptions={FIT}
          >
            <Background />
            <Controls />
          </ReactFlow>
        </div>
        <CanvasSide graph={graph} forms={forms} selection={selection} problems={byElement} emit={emit} remove={remove}>
          <ReplayPanel agentId={agentId} replay={replay} steps={steps ?? []} onSteps={setSteps} />
        </CanvasSide>
      </div>
    </div>
  );
}

interface CanvasSideProps {
  graph: ChainGraph;
  forms: ToolForms;
  selection: Selection;
  problems: ReturnType<typeof problemsByElement>;
  emit: (next: ChainGraph) => void;
  remove: (nodeIds: string[], edgeIds: string[]) => void;
  children: ReactNode;
}

/** Beside the canvas: the selected node's or connection's editor, then the replay. */
function CanvasSide({ graph, forms, selection, problems, emit, remove, children }: CanvasSideProps) {
  const selectedNode = selection?.kind === 'node' ? graph.nodes.find((n) => n.id === selection.id) : undefined;
  const selectedEdge = selection?.kind === 'edge' ? graph.edges.find((e) => e.id === selection.id) : undefined;
  return (
    <div className="canvas-side">
      {selectedNode ? (
        <NodeInspector
          key={selectedNode.id}
          node={selectedNode}
          graph={graph}
          forms={forms}
          problems={problems.nodes[selectedNode.id] ?? []}
          onEdit={(edit) => emit(editNode(graph, selectedNode.id, edit))}
          onStart={() => emit({ ...graph, firstId: selectedNode.id })}
          onConnect={(target, relation) => emit(connect(graph, selectedNode.id, target, relation))}
          onDelete={() => remove([selectedNode.id], [])}
        />
      ) : selectedEdge ? (
        <EdgeInspector edge={selectedEdge} problems={problems.edges[selectedEdge.id] ?? []} onRelation={(r) => emit(setRelation(graph, selectedEdge.id, r))} onDelete={() => remove([], [selectedEdge.id])} />
      ) : (
        <p className="muted canvas-panel">Select a node to edit its configuration, or a connection to change its relation.</p>
      )}
      {children}
    </div>
  );
}

/**
 * React Flow's nodes: the graph's, with what React Flow measured and where a drag has them so far
 * (kept across redraws; the graph gets the position when the drag stops).
 */
/** A node or edge React Flow selected (a click, or Enter on a focused one): the page's selection. */
function selectFrom(changes: ReadonlyArray<{ type: string; id?: string; selected?: boolean }>, kind: 'node' | 'edge', select: (s: Selection) => void): void {
  const picked = changes.find((c) => c.type === 'select' && c.selected && c.id !== undefined);
  if (picked?.id !== undefined) select({ kind, id: picked.id });
}

function useFlowNodes(graph: ChainGraph, selection: Selection, problems: Record<string, string[]>, replay: ReturnType<typeof replayOf> | null, select: (s: Selection) => void) {
  const [nodes, setNodes] = useState<RuleFlowNode[]>([]);
  useEffect(() => {
    setNodes((prev) =>
      graph.nodes.map((n) => {
        const before = prev.find((p) => p.id === n.id);
        const data: RuleNodeData = { type: n.type, name: n.doc.name ?? '', start: graph.firstId === n.id, problems: problems[n.id] ?? [], replay: replay?.nodes[n.id], replaying: replay !== null };
        return { ...before, id: n.id, type: 'rule', position: n.position, data, selected: selection?.kind === 'node' && selection.id === n.id };
      }),
    );
  }, [graph, selection, problems, replay]);
  // Selection and removal are the page's (see ChainCanvasInner); React Flow's own go through it.
  const onNodesChange = useCallback(
    (changes: NodeChange<RuleFlowNode>[]) => {
      selectFrom(changes, 'node', select);
      setNodes((ns) => applyNodeChanges(changes.filter((c) => c.type !== 'select' && c.type !== 'remove'), ns));
    },
    [select],
  );
  return { nodes, onNodesChange };
}
