import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent, type KeyboardEvent as ReactKeyboardEvent, type PointerEvent as ReactPointerEvent, type ReactNode } from 'react';
import { Background, BaseEdge, Controls, Handle, MarkerType, MiniMap, Position, ReactFlow, ReactFlowProvider, applyNodeChanges, useNodes, useReactFlow, type Connection, type Edge, type EdgeProps, type Node, type NodeChange, type NodeProps } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import './chain-canvas.css';
import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { addNode, chainDsl, chainGraph, clipOf, connect, editNode, insertOnEdge, moveNodes, moveOntoEdge, nextPosition, pasteClip, problemsByElement, removeElements, setRelation, storedPosition, type ChainGraph, type GraphClip, type Point, type SaveProblem } from '../lib/chain-graph';
import { chainIssues, issuesByNode, type ChainIssue } from '../lib/chain-validate';
import { NODE_SIZE, autoLayout, pathOf, routeEdge, type Box } from '../lib/chain-layout';
import { fmtMs, replayOf, type NodeReplay, type Replay } from '../lib/chain-replay';
import { EdgeInspector, NodeInspector, RelationInput } from './ChainInspector';
import { ReplayPanel, type ReplayPanelProps, type ReplayedRun } from './RunReplay';
import { NodePalette, NODE_DRAG_TYPE } from './NodePalette';
import { Tabs } from './ui';

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
  /** The last save's problems (the 400 split, or its warnings), each tied to the node it named, or none. */
  problems: readonly SaveProblem[];
  onChange: (next: RuleChainDsl) => void;
  /** The agent the chain is (its recent runs can be replayed); none for a rule chain. */
  agentId?: string;
  /** A node to select and bring into sight (a new object each time: a blocker clicked under the canvas). */
  focusNode?: { id: string } | null;
}

interface RuleNodeData extends Record<string, unknown> {
  type: string;
  name: string;
  start: boolean;
  /** The gateway's problems of this node (the last save's 400 or its warnings). */
  problems: string[];
  /** What the canvas itself finds (lib/chain-validate.ts). */
  issues: ChainIssue[];
  replay: NodeReplay | undefined;
  replaying: boolean;
}
type RuleFlowNode = Node<RuleNodeData, 'rule'>;
/** What is selected: nodes (shift-click, a box drawn with Shift held) and connections. */
interface Selection {
  nodes: string[];
  edges: string[];
}
const NOTHING: Selection = { nodes: [], edges: [] };

function RuleNode({ id, data, selected }: NodeProps<RuleFlowNode>) {
  const ran = data.replay;
  const blocked = data.problems.length > 0 || data.issues.some((i) => i.blocker);
  const noted = !blocked && data.issues.length > 0;
  const cls = ['canvas-node', selected ? 'selected' : '', blocked ? 'has-problem' : '', noted ? 'has-note' : '', data.replaying ? (ran ? (ran.failed ? 'ran failed' : 'ran') : 'not-run') : ''].filter(Boolean).join(' ');
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
        <div className={ran.failed ? 'canvas-node-run failed' : 'canvas-node-run'}>
          #{ran.order.join(', #')} · {ran.relations.join(', ') || 'end'} · {fmtMs(ran.ms)}
        </div>
      ) : null}
      {ran?.error ? <div className="canvas-node-error">{ran.error}</div> : null}
      {data.problems.length || data.issues.length ? (
        <div className="canvas-node-problem" role="alert">
          {data.problems.map((p) => (
            <div key={p}>{p.replace(/^(?:.*?: )?metadata\.nodes\[\d+\](?: \("[^"]*"\))?,?\s*/, '')}</div>
          ))}
          {data.issues.map((i) => (
            <div key={i.text} className={i.blocker ? 'issue-blocker' : 'issue-note'}>
              {i.text}
            </div>
          ))}
        </div>
      ) : null}
      <Handle type="source" position={Position.Right} aria-label={`out of ${id}`} />
    </div>
  );
}

const NODE_TYPES = { rule: RuleNode };

/**
 * A connection drawn on its orthogonal route round the nodes (lib/chain-layout.ts), never under
 * one. A node being dragged is not routed round: the connection stays where it is, so the node
 * can be dropped onto it.
 */
function RoutedEdge({ id, source, target, sourceX, sourceY, targetX, targetY, label, markerEnd, style }: EdgeProps) {
  const nodes = useNodes();
  const boxes: Box[] = nodes.filter((n) => !n.dragging).map((n) => ({ id: n.id, x: n.position.x, y: n.position.y, width: n.measured?.width ?? 208, height: n.measured?.height ?? 72 }));
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

function flowEdges(graph: ChainGraph, selection: Selection, followed: ReadonlySet<string> | null, problems: Record<string, string[]>, dropTarget: string | null): Edge[] {
  return graph.edges.map((e) => ({
    id: e.id,
    source: e.source,
    target: e.target,
    label: e.relation,
    selected: selection.edges.includes(e.id),
    type: 'routed',
    markerEnd: { type: MarkerType.ArrowClosed },
    animated: followed?.has(e.id) ?? false,
    className: [followed ? (followed.has(e.id) ? 'followed' : 'not-followed') : '', problems[e.id] ? 'has-problem' : '', dropTarget === e.id ? 'drop-target' : ''].filter(Boolean).join(' '),
    data: { relation: e.relation },
  }));
}

function CanvasToolbar({ relation, onRelation, children }: { relation: string; onRelation: (r: string) => void; children: ReactNode }) {
  return (
    <div className="canvas-toolbar">
      <RelationInput id="canvas-new-relation" label="Relation of new connections" value={relation} onValue={onRelation} />
      {children}
      <p className="hint">
        Drag from a right handle to a left one to connect. Shift-click or Shift-drag selects several; Ctrl+C, Ctrl+V, Ctrl+D copy, paste, duplicate; Delete removes; Ctrl+Z undoes.
      </p>
    </div>
  );
}

interface CanvasKeys {
  undo: () => void;
  redo: () => void;
  copy: () => boolean;
  paste: () => void;
  duplicate: () => void;
  selectAll: () => void;
  fullscreen: boolean;
  setFullscreen: (on: boolean) => void;
}

/**
 * The canvas's keys on the whole page while it shows (a click on the pane leaves focus on the
 * body): Ctrl+Z, Ctrl+Shift+Z / Ctrl+Y, Ctrl+C, Ctrl+V, Ctrl+D, Ctrl+A, and Escape (fullscreen).
 * Delete, the arrows, Enter and Escape on a focused node are React Flow's.
 */
function useCanvasKeys(opts: CanvasKeys) {
  const latest = useRef(opts);
  latest.current = opts;
  useEffect(() => {
    const listen = (e: KeyboardEvent) => {
      const k = latest.current;
      // Typing in a field keeps the browser's own undo, copy and paste there.
      if (e.target instanceof HTMLElement && e.target.closest('input, textarea, select, [contenteditable="true"]')) return;
      const key = e.key.toLowerCase();
      const mod = e.ctrlKey || e.metaKey;
      if (mod && key === 'z') {
        e.preventDefault();
        if (e.shiftKey) k.redo();
        else k.undo();
      } else if (mod && key === 'y') {
        e.preventDefault();
        k.redo();
      } else if (mod && key === 'c') {
        // Text selected on the page is the browser's to copy.
        if (window.getSelection()?.toString()) return;
        if (k.copy()) e.preventDefault();
      } else if (mod && key === 'v') {
        e.preventDefault();
        k.paste();
      } else if (mod && key === 'd') {
        e.preventDefault();
        k.duplicate();
      } else if (mod && key === 'a' && (e.target === document.body || (e.target instanceof HTMLElement && e.target.closest('.canvas-flow')))) {
        e.preventDefault();
        k.selectAll();
      } else if (key === 'escape' && k.fullscreen) k.setFullscreen(false);
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

/** React Flow blurs a node that Escape unselects: the keyboard user keeps their place on it. */
function keepFocusOnEscape(e: ReactKeyboardEvent<HTMLDivElement>): void {
  const node = e.target instanceof HTMLElement && e.key === 'Escape' ? e.target.closest<HTMLElement>('.react-flow__node') : null;
  if (node) window.setTimeout(() => node.focus(), 0);
}

/** The connection drawn nearest the screen point (x, y), within 14 px, or undefined: where a dropped node goes in between. */
function edgeAt(x: number, y: number): string | undefined {
  let best: { id: string; d: number } | undefined;
  for (const edge of Array.from(document.querySelectorAll('.canvas-flow .react-flow__edge'))) {
    const path = edge.querySelector('path.react-flow__edge-path') as SVGPathElement | null;
    const ctm = path?.getScreenCTM();
    if (!path || !ctm) continue;
    const len = path.getTotalLength();
    for (let s = 0; s <= len; s += 4) {
      const p = path.getPointAtLength(s).matrixTransform(ctm);
      const d = Math.hypot(p.x - x, p.y - y);
      if (d <= 14 && (!best || d < best.d)) best = { id: edge.getAttribute('data-id') ?? '', d };
    }
  }
  return best?.id;
}

/** How far a paste lands from what was copied: right a little and down by more than a node's height, so no copy hides its original. */
const PASTE_STEP = { x: 40, y: NODE_SIZE.height + 40 };

/** Copy, paste, duplicate and select-all over the selected nodes; each paste lands a step further down and right. */
function useClipboard(graph: ChainGraph, selection: Selection, emit: (g: ChainGraph) => void, select: (s: Selection) => void, fit: () => Promise<boolean>) {
  const clip = useRef<{ clip: GraphClip; pasted: number } | null>(null);
  const place = (c: GraphClip, times: number) => {
    if (c.nodes.length === 0) return;
    const { graph: next, ids } = pasteClip(graph, c, { x: PASTE_STEP.x * times, y: PASTE_STEP.y * times });
    emit(next);
    select({ nodes: ids, edges: [] });
    // The copies in sight, once React Flow has measured them.
    window.setTimeout(() => void fit(), 50);
  };
  return {
    copy: () => {
      if (selection.nodes.length === 0) return false;
      clip.current = { clip: clipOf(graph, selection.nodes), pasted: 0 };
      return true;
    },
    paste: () => {
      if (!clip.current) return;
      clip.current.pasted += 1;
      place(clip.current.clip, clip.current.pasted);
    },
    duplicate: () => place(clipOf(graph, selection.nodes), 1),
    selectAll: () => select({ nodes: graph.nodes.map((n) => n.id), edges: graph.edges.map((e) => e.id) }),
  };
}

interface CanvasEditsInput {
  graph: ChainGraph;
  emit: (next: ChainGraph) => void;
  selection: Selection;
  setSelection: (s: Selection) => void;
  relation: string;
  flowNodes: ReturnType<typeof useFlowNodes>;
  focusNode: { id: string } | null | undefined;
}

/** What the canvas's pointer edits do: add, drop from the palette, connect, move, remove, lay out; and the panel's Escape. */
function useCanvasEdits({ graph, emit, selection, setSelection, relation, flowNodes, focusNode }: CanvasEditsInput) {
  const flow = useReactFlow();
  // A blocker clicked below the canvas: that node selected and brought into sight.
  useEffect(() => {
    if (!focusNode) return;
    setSelection({ nodes: [focusNode.id], edges: [] });
    window.setTimeout(() => void flow.fitView({ nodes: [{ id: focusNode.id }], maxZoom: 1, padding: 0.6 }), 50);
  }, [focusNode, flow]);
  const add = (type: string) => {
    const { graph: next, id } = addNode(graph, type, nextPosition(graph));
    emit(next);
    setSelection({ nodes: [id], edges: [] });
    // React Flow runs a fitView once the new node is measured, so the node is in sight.
    void flow.fitView(FIT);
  };
  const drop = (e: DragEvent<HTMLDivElement>) => {
    const type = e.dataTransfer.getData(NODE_DRAG_TYPE);
    if (!type) return;
    e.preventDefault();
    const at = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    const position = { x: Math.round(at.x - NODE_SIZE.width / 2), y: Math.round(at.y - NODE_SIZE.height / 2) };
    const onEdge = edgeAt(e.clientX, e.clientY);
    const { graph: next, id } = onEdge ? insertOnEdge(graph, onEdge, type, position) : addNode(graph, type, position);
    emit(next);
    setSelection({ nodes: [id], edges: [] });
    // An insertion moves nodes right: all of them back in sight.
    if (onEdge) window.setTimeout(() => void flow.fitView(FIT), 50);
  };
  const onConnect = (c: Connection) => emit(connect(graph, c.source, c.target, relation.trim() || 'Success'));
  // A lone node without connections dragged over a connection: that connection is marked, and
  // dropping the node there puts it in between (as the palette's insert-on-edge does).
  const [dropTarget, setDropTarget] = useState<string | null>(null);
  const spliceTarget = (e: MouseEvent | TouchEvent, dragged: Node[]): string | undefined => {
    const only = dragged.length === 1 ? dragged[0] : undefined;
    const at = 'changedTouches' in e ? e.changedTouches[0] : e;
    if (!only || !at || graph.edges.some((c) => c.source === only.id || c.target === only.id)) return undefined;
    return edgeAt(at.clientX, at.clientY);
  };
  const onDrag = (e: MouseEvent | TouchEvent, _node: Node, dragged: Node[]) => setDropTarget(spliceTarget(e, dragged) ?? null);
  const onDragStop = (e: MouseEvent | TouchEvent, _node: Node, dragged: Node[]) => {
    flowNodes.dragging.current = false;
    setDropTarget(null);
    const onEdge = spliceTarget(e, dragged);
    const spliced = onEdge && dragged[0] ? moveOntoEdge(graph, onEdge, dragged[0].id, dragged[0].position) : null;
    emit(spliced ?? moveNodes(graph, new Map<string, Point>(dragged.map((n) => [n.id, n.position]))));
    if (spliced) window.setTimeout(() => void flow.fitView(FIT), 50);
  };
  const remove = (nodeIds: string[], edgeIds: string[]) => {
    if (nodeIds.length === 0 && edgeIds.length === 0) return;
    emit(removeElements(graph, nodeIds, edgeIds));
    setSelection(NOTHING);
  };
  const layout = () => {
    const sizes = new Map(flowNodes.nodes.filter((n) => n.measured?.width).map((n) => [n.id, { width: n.measured?.width ?? 208, height: n.measured?.height ?? 72 }]));
    emit(moveNodes(graph, autoLayout(graph, sizes)));
    window.setTimeout(() => void flow.fitView(FIT), 50);
  };
  // Escape in the side panel closes it and gives the focus back to the node it showed.
  const closePanel = () => {
    const id = selection.nodes[0];
    setSelection(NOTHING);
    if (id !== undefined) (document.querySelector(`.canvas-flow .react-flow__node[data-id="${CSS.escape(id)}"]`) as HTMLElement | null)?.focus();
  };
  return { add, drop, onConnect, onDrag, onDragStop, dropTarget, remove, layout, closePanel };
}

function ChainCanvasInner({ dsl, forms, problems, onChange, agentId, focusNode }: ChainCanvasProps) {
  const { graph, emit, undo, redo } = useCanvasGraph(dsl, onChange);
  const [fullscreen, setFullscreen] = useState(false);
  const [sideWidth, setSideWidth] = useState(352);
  const [selection, setSelection] = useState<Selection>(NOTHING);
  const [relation, setRelationDraft] = useState('Success');
  const byElement = useMemo(() => problemsByElement(problems, graph), [problems, graph]);
  const issues = useMemo(() => issuesByNode(chainIssues(graph, forms)), [graph, forms]);
  const { replay, panel: replayPanel } = useReplay(graph, selection, setSelection, agentId);
  const flowNodes = useFlowNodes(graph, selection, byElement.nodes, issues, replay, setSelection, emit);
  const { fitView } = useReactFlow();
  const clipboard = useClipboard(graph, selection, emit, setSelection, () => fitView(FIT));

  const { add, drop, onConnect, onDrag, onDragStop, dropTarget, remove, layout, closePanel } = useCanvasEdits({ graph, emit, selection, setSelection, relation, flowNodes, focusNode });
  const edges = useMemo(() => flowEdges(graph, selection, replay ? new Set(replay.edges) : null, byElement.edges, dropTarget), [graph, selection, replay, byElement.edges, dropTarget]);
  useCanvasKeys({ undo, redo, ...clipboard, fullscreen, setFullscreen });
  return (
    <div className={fullscreen ? 'chain-canvas fullscreen' : 'chain-canvas'} style={{ ['--side-width' as string]: `${sideWidth}px` }}>
      <CanvasToolbar relation={relation} onRelation={setRelationDraft}>
        <CanvasActions undo={undo} redo={redo} layout={layout} fullscreen={fullscreen} setFullscreen={setFullscreen} />
      </CanvasToolbar>
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
        <div
          className="canvas-flow"
          role="application"
          aria-label="Rule chain canvas"
          onDragOver={(e) => {
            if (!e.dataTransfer.types.includes(NODE_DRAG_TYPE)) return;
            e.preventDefault();
            e.dataTransfer.dropEffect = 'copy';
          }}
          onDrop={drop}
          onKeyDown={keepFocusOnEscape}
        >
          <ReactFlow
            nodes={flowNodes.nodes}
            edges={edges}
            nodeTypes={NODE_TYPES}
            edgeTypes={EDGE_TYPES}
            onNodesChange={flowNodes.onNodesChange}
            onNodeDragStart={() => (flowNodes.dragging.current = true)}
            onNodeDrag={onDrag}
            onNodeDragStop={onDragStop}
            onConnect={onConnect}
            onEdgesChange={(changes) => setSelection((s) => selectionAfter(s, changes, 'edges'))}
            onPaneClick={() => setSelection(NOTHING)}
            onDelete={({ nodes, edges: gone }) => remove(nodes.map((n) => n.id), gone.map((e) => e.id))}
            deleteKeyCode={['Delete', 'Backspace']}
            selectionKeyCode="Shift"
            multiSelectionKeyCode={['Shift', 'Meta', 'Control']}
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
        <CanvasSide graph={graph} forms={forms} selection={selection} problems={byElement} emit={emit} remove={remove} duplicate={clipboard.duplicate} onClose={closePanel} onAdd={add} replaying={replay !== null}>
          <ReplayPanel {...replayPanel} />
        </CanvasSide>
      </div>
    </div>
  );
}

/** The run replayed on the canvas and the step last clicked in its list (which selects that step's node). */
function useReplay(graph: ChainGraph, selection: Selection, setSelection: (s: Selection) => void, agentId: string | undefined): { replay: Replay | null; panel: ReplayPanelProps } {
  const [run, setRun] = useState<ReplayedRun | null>(null);
  const [chosen, setChosen] = useState<number | null>(null);
  const replay = useMemo(() => (run ? replayOf(graph, run.steps) : null), [graph, run]);
  const panel: ReplayPanelProps = {
    ...(agentId ? { agentId } : {}),
    run,
    replay,
    onRun: (next) => {
      setRun(next);
      setChosen(null);
    },
    chosen,
    onChoose: (i) => {
      setChosen(i);
      const nodeId = run?.steps[i]?.nodeId;
      if (nodeId !== undefined && graph.nodes.some((n) => n.id === nodeId)) setSelection({ nodes: [nodeId], edges: [] });
    },
    selectedNode: selection.nodes.length === 1 ? selection.nodes[0] : undefined,
  };
  return { replay, panel };
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
  duplicate: () => void;
  onClose: () => void;
  onAdd: (type: string) => void;
  /** The replay (components/RunReplay.tsx), the side panel's second tab. */
  children: ReactNode;
  /** A run is shown on the canvas. */
  replaying: boolean;
}

type SideView = 'edit' | 'replay';

/**
 * Beside the canvas, two tabs. Edit: the node palette while nothing is selected (or when asked
 * for with Add nodes), else the selected node's or connection's editor (or what to do with
 * several). Replay: a run's steps, where a node clicked on the canvas shows what it got and
 * passed on rather than its form (the run is being read, not the chain edited).
 */
function CanvasSide(props: CanvasSideProps) {
  const { graph, selection, onClose, onAdd, forms, children } = props;
  const [palette, setPalette] = useState(false);
  const [view, setView] = useState<SideView>('edit');
  // Clear replay: back to editing, the selection's form in the panel again.
  const wasReplaying = useRef(props.replaying);
  useEffect(() => {
    if (wasReplaying.current && !props.replaying) setView('edit');
    wasReplaying.current = props.replaying;
  }, [props.replaying]);
  const side = useRef<HTMLDivElement>(null);
  // A new selection shows its editor.
  useEffect(() => {
    setPalette(false);
  }, [selection]);
  // Whatever the panel shows next starts at its top (not where the palette was scrolled to).
  // (A block: Chromium's scrollTo returns a promise, which React would take for a cleanup.)
  useEffect(() => {
    if (side.current) side.current.scrollTop = 0;
  }, [selection, palette, view]);
  const selected = selection.nodes.length > 0 || selection.edges.some((id) => graph.edges.some((e) => e.id === id));
  return (
    <div
      ref={side}
      className="canvas-side"
      onKeyDown={(e) => {
        // (A code editor's Escape that closed one of its popups is marked handled: the panel stays.)
        if (e.key === 'Escape' && selected && !e.defaultPrevented && !(e.target instanceof HTMLSelectElement)) {
          e.stopPropagation();
          onClose();
        }
      }}
    >
      <Tabs
        label="Side panel"
        value={view}
        onValue={setView}
        tabs={[
          { id: 'edit', label: 'Edit' },
          { id: 'replay', label: 'Replay a run' },
        ]}
      />
      {view === 'replay' ? (
        children
      ) : (
        <>
          {selected ? (
            <button type="button" className="secondary" aria-pressed={palette} onClick={() => setPalette(!palette)}>
              {palette ? 'Back to the selection' : 'Add nodes'}
            </button>
          ) : null}
          {!selected || palette ? <NodePalette forms={forms} onAdd={onAdd} /> : <SelectionPanel {...props} />}
        </>
      )}
    </div>
  );
}

/** The selected node's or connection's editor, or what to do with several nodes. */
function SelectionPanel({ graph, forms, selection, problems, emit, remove, duplicate }: CanvasSideProps) {
  const one = selection.nodes.length === 1 && selection.edges.filter((id) => graph.edges.some((e) => e.id === id && e.source !== selection.nodes[0] && e.target !== selection.nodes[0])).length === 0;
  const selectedNode = one ? graph.nodes.find((n) => n.id === selection.nodes[0]) : undefined;
  const selectedEdge = selection.nodes.length === 0 && selection.edges.length === 1 ? graph.edges.find((e) => e.id === selection.edges[0]) : undefined;
  if (selectedNode) {
    return (
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
    );
  }
  if (selectedEdge) return <EdgeInspector edge={selectedEdge} problems={problems.edges[selectedEdge.id] ?? []} onRelation={(r) => emit(setRelation(graph, selectedEdge.id, r))} onDelete={() => remove([], [selectedEdge.id])} />;
  return (
    <section className="canvas-panel" aria-label="Selection">
      <h3>
        {selection.nodes.length} node{selection.nodes.length === 1 ? '' : 's'} selected
      </h3>
      <p className="muted">{[...selection.nodes, ...selection.edges.map((id) => `connection ${id}`)].join(', ')}</p>
      <div className="form-actions">
        <button type="button" className="secondary" onClick={duplicate} title="Ctrl+D" disabled={selection.nodes.length === 0}>
          Duplicate
        </button>
        <button type="button" className="danger" onClick={() => remove(selection.nodes, selection.edges)} title="Delete">
          Delete selection
        </button>
      </div>
    </section>
  );
}

/** `s` after React Flow's select changes of nodes or edges (a click, Shift-click, a box, Enter or Escape on a focused node). */
function selectionAfter(s: Selection, changes: ReadonlyArray<{ type: string; id?: string; selected?: boolean }>, kind: 'nodes' | 'edges'): Selection {
  let ids = s[kind];
  for (const c of changes) {
    if (c.type !== 'select' || c.id === undefined) continue;
    if (c.selected && !ids.includes(c.id)) ids = [...ids, c.id];
    else if (!c.selected && ids.includes(c.id)) ids = ids.filter((id) => id !== c.id);
  }
  return ids === s[kind] ? s : { ...s, [kind]: ids };
}

/**
 * React Flow's nodes: the graph's, with what React Flow measured and where a drag has them so far
 * (kept across redraws; the graph gets the position when the drag stops, or at once when the
 * arrow keys move the selection).
 */
function useFlowNodes(
  graph: ChainGraph,
  selection: Selection,
  problems: Record<string, string[]>,
  issues: Record<string, ChainIssue[]>,
  replay: ReturnType<typeof replayOf> | null,
  select: (update: (s: Selection) => Selection) => void,
  emit: (next: ChainGraph) => void,
) {
  const [nodes, setNodes] = useState<RuleFlowNode[]>([]);
  const dragging = useRef(false);
  useEffect(() => {
    setNodes((prev) =>
      graph.nodes.map((n) => {
        const before = prev.find((p) => p.id === n.id);
        const data: RuleNodeData = { type: n.type, name: n.doc.name ?? '', start: graph.firstId === n.id, problems: problems[n.id] ?? [], issues: issues[n.id] ?? [], replay: replay?.nodes[n.id], replaying: replay !== null };
        return { ...before, id: n.id, type: 'rule', position: n.position, data, selected: selection.nodes.includes(n.id), ariaLabel: `${n.type} node ${n.doc.name || n.id}` };
      }),
    );
  }, [graph, selection, problems, issues, replay]);
  // Selection and removal are the page's (see ChainCanvasInner); React Flow's own go through it.
  const onNodesChange = useCallback(
    (changes: NodeChange<RuleFlowNode>[]) => {
      select((s) => selectionAfter(s, changes, 'nodes'));
      // The arrow keys move the selected nodes at once (a drag's end is onNodeDragStop's).
      const moved = new Map<string, Point>();
      for (const c of changes) if (c.type === 'position' && c.position && !c.dragging && !dragging.current) moved.set(c.id, c.position);
      if (moved.size > 0) emit(moveNodes(graph, moved));
      else setNodes((ns) => applyNodeChanges(changes.filter((c) => c.type !== 'select' && c.type !== 'remove'), ns));
    },
    [select, emit, graph],
  );
  return { nodes, onNodesChange, dragging };
}
