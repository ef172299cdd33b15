import { useCallback, useEffect, useMemo, useRef, useState, type PointerEvent as ReactPointerEvent, type ReactNode } from 'react';
import { Background, BaseEdge, Controls, Handle, MarkerType, MiniMap, Position, ReactFlow, ReactFlowProvider, applyNodeChanges, useNodes, useReactFlow, type Connection, type Edge, type EdgeProps, type Node, type NodeChange, type NodeProps } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import './chain-canvas.css';
import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { addNode, chainDsl, chainGraph, connect, editNode, moveNodes, nextPosition, problemsByElement, removeElements, setRelation, storedPosition, type ChainGraph, type Point } from '../lib/chain-graph';
import { autoLayout, pathOf, routeEdge, type Box } from '../lib/chain-layout';
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

/** A connection drawn on its orthogonal route round the nodes (lib/chain-layout.ts), never under one. */
function RoutedEdge({ id, source, target, sourceX, sourceY, targetX, targetY, label, markerEnd, style }: EdgeProps) {
  const nodes = useNodes();
  const boxes: Box[] = nodes.map((n) => ({ id: n.id, x: n.position.x, y: n.position.y, width: n.measured?.width ?? 208, height: n.measured?.height ?? 72 }));
  const { d, label: at } = pathOf(routeEdge({ x: sourceX, y: sourceY }, { x: targetX, y: targetY }, source, target, boxes));
  return <BaseEdge id={id} path={d} label={label} labelX={at.x} labelY={at.y} labelBgPadding={[4, 2]} markerEnd={markerEnd} {...(style ? { style } : {})} />;
}
const EDGE_TYPES = { routed: RoutedEdge };
// Small chains are shown at their size rather than blown up; larger ones are zoomed out to fit.
const FIT = { padding: 0.2, maxZoom: 1 };

/**
 * The chain's graph, laid out by dagre when no node has a stored position (nothing is written
 * until an edit); stored positions are the author's and stay (Auto-layout redoes them on demand).
 */
function drawnGraph(dsl: RuleChainDsl): ChainGraph {
  const graph = chainGraph(dsl);
  return dsl.metadata.nodes.some((n) => storedPosition(n)) ? graph : moveNodes(graph, autoLayout(graph));
}

/** The graph of the draft, redrawn when the draft changes from outside (the JSON tab, a save's answer). */
function useCanvasGraph(dsl: RuleChainDsl, onChange: (next: RuleChainDsl) => void) {
  const [graph, setGraph] = useState<ChainGraph>(() => drawnGraph(dsl));
  const emitted = useRef<RuleChainDsl | null>(null);
  useEffect(() => {
    if (dsl !== emitted.current) setGraph(drawnGraph(dsl));
  }, [dsl]);
  // Once edited here, every node's position is written (RuleGo's additionalInfo.layoutX/Y).
  const history = useRef<{ past: ChainGraph[]; future: ChainGraph[] }>({ past: [], future: [] });
  const show = useCallback(
    (next: ChainGraph) => {
      setGraph(next);
      const out = chainDsl(dsl, next, { positions: true });
      emitted.current = out;
      onChange(out);
    },
    [dsl, onChange],
  );
  // Every edit is one step back (Ctrl+Z) and forward again (Ctrl+Shift+Z).
  const emit = useCallback(
    (next: ChainGraph) => {
      history.current = { past: [...history.current.past.slice(-199), graph], future: [] };
      show(next);
    },
    [graph, show],
  );
  const undo = useCallback(() => {
    const prev = history.current.past.at(-1);
    if (!prev) return;
    history.current = { past: history.current.past.slice(0, -1), future: [graph, ...history.current.future] };
    show(prev);
  }, [graph, show]);
  const redo = useCallback(() => {
    const next = history.current.future[0];
    if (!next) return;
    history.current = { past: [...history.current.past, graph], future: history.current.future.slice(1) };
    show(next);
  }, [graph, show]);
  return { graph, emit, undo, redo };
}

function flowEdges(graph: ChainGraph, selection: Selection, followed: ReadonlySet<string> | null, problems: Record<string, string[]>): Edge[] {
  return graph.edges.map((e) => ({
    id: e.id,
    source: e.source,
    target: e.target,
    label: e.relation,
    selected: selection?.kind === 'edge' && selection.id === e.id,
    type: 'routed',
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

/** Ctrl+Z, Ctrl+Shift+Z / Ctrl+Y and Escape (fullscreen) on the whole page while the canvas shows: a click on the pane leaves focus on the body. */
function useCanvasKeys(opts: { undo: () => void; redo: () => void; fullscreen: boolean; setFullscreen: (on: boolean) => void }) {
  const latest = useRef(opts);
  latest.current = opts;
  useEffect(() => {
    const listen = (e: KeyboardEvent) => {
      const { undo, redo, fullscreen, setFullscreen } = latest.current;
      // Typing in a field keeps the browser's own undo there.
      if (e.target instanceof HTMLElement && e.target.closest('input, textarea, select, [contenteditable="true"]')) return;
      const key = e.key.toLowerCase();
      if ((e.ctrlKey || e.metaKey) && key === 'z') {
        e.preventDefault();
        if (e.shiftKey) redo();
        else undo();
      } else if ((e.ctrlKey || e.metaKey) && key === 'y') {
        e.preventDefault();
        redo();
      } else if (key === 'escape' && fullscreen) setFullscreen(false);
    };
    window.addEventListener('keydown', listen);
    return () => window.removeEventListener('keydown', listen);
  }, []);
}

function CanvasActions({ undo, redo, layout, fullscreen, setFullscreen }: { undo: () => void; redo: () => void; layout: () => void; fullscreen: boolean; setFullscreen: (on: boolean) => void }) {
  return (
    <div className="canvas-actions" role="toolbar" aria-label="Canvas actions">
      <button type="button" className="secondary" onClick={undo} title="Ctrl+Z">
        Undo
      </button>
      <button type="button" className="secondary" onClick={redo} title="Ctrl+Shift+Z">
        Redo
      </button>
      <button type="button" className="secondary" onClick={layout}>
        Auto-layout
      </button>
      <button type="button" className="secondary" aria-pressed={fullscreen} onClick={() => setFullscreen(!fullscreen)} title="Escape leaves it">
        {fullscreen ? 'Leave fullscreen' : 'Fullscreen'}
      </button>
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
  const { graph, emit, undo, redo } = useCanvasGraph(dsl, onChange);
  const [fullscreen, setFullscreen] = useState(false);
  const [sideWidth, setSideWidth] = useState(352);
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
  const layout = () => {
    const sizes = new Map(flowNodes.nodes.filter((n) => n.measured?.width).map((n) => [n.id, { width: n.measured?.width ?? 208, height: n.measured?.height ?? 72 }]));
    emit(moveNodes(graph, autoLayout(graph, sizes)));
    window.setTimeout(() => void flow.fitView(FIT), 50);
  };
  useCanvasKeys({ undo, redo, fullscreen, setFullscreen });
  return (
    <div className={fullscreen ? 'chain-canvas fullscreen' : 'chain-canvas'} style={{ ['--side-width' as string]: `${sideWidth}px` }}>
      <CanvasToolbar forms={forms} onAdd={add} relation={relation} onRelation={setRelationDraft} />
      <CanvasActions undo={undo} redo={redo} layout={layout} fullscreen={fullscreen} setFullscreen={setFullscreen} />
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
            edgeTypes={EDGE_TYPES}
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
            minZoom={0.2}
          >
            <Background />
            <Controls />
            <MiniMap pannable zoomable ariaLabel="Minimap of the chain" />
          </ReactFlow>
        </div>
        <SideResizer width={sideWidth} onWidth={setSideWidth} />
        <CanvasSide graph={graph} forms={forms} selection={selection} problems={byElement} emit={emit} remove={remove}>
          <ReplayPanel agentId={agentId} replay={replay} steps={steps ?? []} onSteps={setSteps} />
        </CanvasSide>
      </div>
    </div>
  );
}

const SIDE_MIN = 256;
const SIDE_MAX = 720;

/** The handle between canvas and side panel: drag it, or focus it and use the arrow keys. */
function SideResizer({ width, onWidth }: { width: number; onWidth: (w: number) => void }) {
  const clamp = (w: number) => Math.min(SIDE_MAX, Math.max(SIDE_MIN, Math.round(w)));
  const onPointerDown = (e: ReactPointerEvent<HTMLDivElement>) => {
    const startX = e.clientX;
    const start = width;
    const el = e.currentTarget;
    el.setPointerCapture(e.pointerId);
    const move = (ev: PointerEvent) => onWidth(clamp(start - (ev.clientX - startX)));
    const up = () => {
      el.removeEventListener('pointermove', move);
      el.removeEventListener('pointerup', up);
    };
    el.addEventListener('pointermove', move);
    el.addEventListener('pointerup', up);
  };
  return (
    <div
      className="canvas-resizer"
      role="separator"
      aria-orientation="vertical"
      aria-label="Resize the side panel"
      aria-valuemin={SIDE_MIN}
      aria-valuemax={SIDE_MAX}
      aria-valuenow={width}
      tabIndex={0}
      onPointerDown={onPointerDown}
      onKeyDown={(e) => {
        if (e.key === 'ArrowLeft') onWidth(clamp(width + 32));
        else if (e.key === 'ArrowRight') onWidth(clamp(width - 32));
      }}
    />
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
