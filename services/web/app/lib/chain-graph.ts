import type { RuleChainDsl } from '@agentry/client';

/**
 * The pure half of the rule-chain canvas (`components/ChainCanvas.tsx`): a RuleGo DSL as a graph
 * of nodes and relation-labelled edges, and back. Each graph element keeps the DSL object it came
 * from (`doc`), so keys the editor does not know (RuleGo's `debugMode`, a node's
 * `additionalInfo.description`, keys at any level) are written back as they came, in their order:
 * a chain loaded and written back without edits is the same JSON, and with `positions` only
 * `additionalInfo.layoutX`/`layoutY` (RuleGo's own layout keys) differ. No React here, so the
 * round trip is tested on its own (`test/chain-graph.test.ts`).
 */

export type DslNode = RuleChainDsl['metadata']['nodes'][number];
export type DslConnection = RuleChainDsl['metadata']['connections'][number];

export interface Point {
  x: number;
  y: number;
}

export interface GraphNode {
  id: string;
  type: string;
  position: Point;
  doc: DslNode;
}

export interface GraphEdge {
  id: string;
  source: string;
  target: string;
  relation: string;
  doc: DslConnection;
}

export interface ChainGraph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** The node a run starts at (`metadata.firstNodeIndex`, default the first one). */
  firstId: string | undefined;
}

/** The relations the engine's node types return; a `jsSwitch` may return any other name. */
export const COMMON_RELATIONS = ['Success', 'Failure', 'True', 'False'] as const;

export const LAYER_GAP = 270;
export const ROW_GAP = 130;

/** RuleGo's stored position of a node (`additionalInfo.layoutX`/`layoutY`), when it has one. */
export function storedPosition(node: DslNode): Point | undefined {
  const info = node.additionalInfo;
  const x = info?.layoutX;
  const y = info?.layoutY;
  return typeof x === 'number' && Number.isFinite(x) && typeof y === 'number' && Number.isFinite(y) ? { x, y } : undefined;
}

/**
 * Positions for a chain without stored ones: layers by distance from the first node along the
 * connections (breadth first, so a branch's nodes share a column), nodes nothing reaches in a
 * last column; within a column, DSL order top to bottom.
 */
export function layeredLayout(ids: readonly string[], connections: ReadonlyArray<{ fromId: string; toId: string }>, firstId: string | undefined): Map<string, Point> {
  const layer = new Map<string, number>();
  const queue: string[] = [];
  if (firstId !== undefined && ids.includes(firstId)) {
    layer.set(firstId, 0);
    queue.push(firstId);
  }
  while (queue.length > 0) {
    const at = queue.shift() as string;
    for (const c of connections) {
      if (c.fromId !== at || layer.has(c.toId) || !ids.includes(c.toId)) continue;
      layer.set(c.toId, (layer.get(at) ?? 0) + 1);
      queue.push(c.toId);
    }
  }
  const unreached = layer.size === 0 ? 0 : Math.max(...layer.values()) + 1;
  const rows = new Map<number, number>();
  const out = new Map<string, Point>();
  for (const id of ids) {
    const col = layer.get(id) ?? unreached;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    out.set(id, { x: col * LAYER_GAP, y: row * ROW_GAP });
  }
  return out;
}

/** The chain as a graph: stored positions where a node has them, the layered layout for the others. */
export function chainGraph(dsl: RuleChainDsl): ChainGraph {
  const { nodes, connections } = dsl.metadata;
  const firstId = nodes[dsl.metadata.firstNodeIndex ?? 0]?.id;
  const auto = layeredLayout(
    nodes.map((n) => n.id),
    connections,
    firstId,
  );
  return {
    nodes: nodes.map((doc) => ({ id: doc.id, type: doc.type, position: storedPosition(doc) ?? auto.get(doc.id) ?? { x: 0, y: 0 }, doc })),
    edges: connections.map((doc, i) => ({ id: `c${i}`, source: doc.fromId, target: doc.toId, relation: doc.type, doc })),
    firstId,
  };
}

/** `doc` with its position in RuleGo's layout keys (whole pixels), other keys untouched. */
function withPosition(doc: DslNode, p: Point): DslNode {
  const x = Math.round(p.x);
  const y = Math.round(p.y);
  const stored = storedPosition(doc);
  if (stored && stored.x === x && stored.y === y) return doc;
  return { ...doc, additionalInfo: { ...doc.additionalInfo, layoutX: x, layoutY: y } };
}

/**
 * The DSL of `graph`, built on `dsl` (the chain it was drawn from: its `ruleChain` and every
 * other key stay as they are). Nodes and connections in graph order; `firstNodeIndex` follows the
 * start node (written when the DSL had it, or when the start node is no longer first).
 * `positions`: write each node's position to `additionalInfo` (the canvas does once it was edited).
 */
export function chainDsl(dsl: RuleChainDsl, graph: ChainGraph, opts: { positions?: boolean } = {}): RuleChainDsl {
  const nodes = graph.nodes.map((n) => (opts.positions ? withPosition(n.doc, n.position) : n.doc));
  const connections = graph.edges.map((e) => (e.doc.fromId === e.source && e.doc.toId === e.target && e.doc.type === e.relation ? e.doc : { ...e.doc, fromId: e.source, toId: e.target, type: e.relation }));
  const metadata: RuleChainDsl['metadata'] = { ...dsl.metadata, nodes, connections };
  const firstIndex = Math.max(
    0,
    nodes.findIndex((n) => n.id === graph.firstId),
  );
  if (dsl.metadata.firstNodeIndex !== undefined || firstIndex !== 0) metadata.firstNodeIndex = firstIndex;
  return { ...dsl, metadata };
}

/** `type`'s last segment (`ai/agent` -> `agent`), as ids and default names start. */
function baseName(type: string): string {
  const tail = type.split('/').pop() ?? type;
  return tail.replace(/[^A-Za-z0-9_-]/g, '') || 'node';
}

/** An id no node has: `<type>_<n>` with the smallest free n (ids match the gateway's `[A-Za-z0-9_-]`). */
export function freeNodeId(graph: ChainGraph, type: string): string {
  const taken = new Set(graph.nodes.map((n) => n.id));
  const base = baseName(type);
  for (let i = 1; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** `graph` with a new node of `type` at `position` (an empty configuration the user fills in); the first node becomes the start. */
export function addNode(graph: ChainGraph, type: string, position: Point): { graph: ChainGraph; id: string } {
  const id = freeNodeId(graph, type);
  const doc: DslNode = { id, type, name: id, configuration: {} };
  return { graph: { ...graph, nodes: [...graph.nodes, { id, type, position, doc }], firstId: graph.firstId ?? id }, id };
}

/** Where a new node goes: right of the rightmost node, level with the topmost. */
export function nextPosition(graph: ChainGraph): Point {
  if (graph.nodes.length === 0) return { x: 0, y: 0 };
  return { x: Math.max(...graph.nodes.map((n) => n.position.x)) + LAYER_GAP, y: Math.min(...graph.nodes.map((n) => n.position.y)) };
}

/** `graph` with a connection `source -(relation)-> target`; unchanged when that very connection exists or an end is unknown. */
export function connect(graph: ChainGraph, source: string, target: string, relation: string): ChainGraph {
  const known = (id: string) => graph.nodes.some((n) => n.id === id);
  if (!relation || !known(source) || !known(target)) return graph;
  if (graph.edges.some((e) => e.source === source && e.target === target && e.relation === relation)) return graph;
  const used = graph.edges.map((e) => Number(/^c(\d+)$/.exec(e.id)?.[1] ?? -1));
  const id = `c${Math.max(-1, ...used) + 1}`;
  return { ...graph, edges: [...graph.edges, { id, source, target, relation, doc: { fromId: source, toId: target, type: relation } }] };
}

/** `graph` without these nodes and edges (a node's connections go with it); the start moves to the first node left when it went. */
export function removeElements(graph: ChainGraph, nodeIds: readonly string[], edgeIds: readonly string[]): ChainGraph {
  const nodes = graph.nodes.filter((n) => !nodeIds.includes(n.id));
  const edges = graph.edges.filter((e) => !edgeIds.includes(e.id) && !nodeIds.includes(e.source) && !nodeIds.includes(e.target));
  const firstId = graph.firstId !== undefined && nodeIds.includes(graph.firstId) ? nodes[0]?.id : graph.firstId;
  return { nodes, edges, firstId };
}

/** `graph` with one node's DSL object replaced by `edit(doc)` (its id and type stay). */
export function editNode(graph: ChainGraph, id: string, edit: (doc: DslNode) => DslNode): ChainGraph {
  return { ...graph, nodes: graph.nodes.map((n) => (n.id === id ? { ...n, doc: { ...edit(n.doc), id: n.id, type: n.type } } : n)) };
}

export function setRelation(graph: ChainGraph, edgeId: string, relation: string): ChainGraph {
  return { ...graph, edges: graph.edges.map((e) => (e.id === edgeId && relation ? { ...e, relation } : e)) };
}

export function moveNodes(graph: ChainGraph, moved: ReadonlyMap<string, Point>): ChainGraph {
  return { ...graph, nodes: graph.nodes.map((n) => (moved.has(n.id) ? { ...n, position: moved.get(n.id) as Point } : n)) };
}

export interface GraphProblems {
  /** By node id: the problems of that node, as the gateway wrote them. */
  nodes: Record<string, string[]>;
  /** By edge id. */
  edges: Record<string, string[]>;
  /** Problems that name no node or connection (`ruleChain.name: ...`). */
  other: string[];
}

/**
 * A save's problem (a 400's or a warning) tied to what it named when it was sent: the gateway
 * names nodes and connections by their index in that DSL, and the indices move as soon as a node
 * above is deleted or the text is edited, so the element is kept by its id (a connection by its
 * ends and relation) instead.
 */
export interface SaveProblem {
  /** As the gateway wrote it (`metadata.nodes[3] ("x"), restApiCall: configuration: ...`). */
  text: string;
  /** The node the path named in the DSL sent. */
  nodeId?: string;
  /** The connection the path named in the DSL sent. */
  connection?: { fromId: string; toId: string; type: string };
}

// Not anchored: the gateway's message starts with a phrase of its own ("Invalid input: metadata.nodes[1] ...").
export const NODE_PATH = /\bmetadata\.nodes\[(\d+)\]/;
export const CONNECTION_PATH = /\bmetadata\.connections\[(\d+)\]/;

/** `problems` (already split, see `splitProblems`) with the node or connection each names in `sent`, the DSL they are about. */
export function anchorProblems(problems: readonly string[], sent: RuleChainDsl): SaveProblem[] {
  return problems.map((text) => {
    const node = NODE_PATH.exec(text);
    if (node) {
      const id = sent.metadata?.nodes?.[Number(node[1])]?.id;
      return typeof id === 'string' ? { text, nodeId: id } : { text };
    }
    const conn = CONNECTION_PATH.exec(text);
    const c = conn ? sent.metadata?.connections?.[Number(conn[1])] : undefined;
    return c ? { text, connection: { fromId: c.fromId, toId: c.toId, type: c.type } } : { text };
  });
}

/**
 * A save's problems by the graph element they were about (see `SaveProblem`). One whose node or
 * connection has since been deleted is dropped: what it complained of is gone.
 */
export function problemsByElement(problems: readonly SaveProblem[], graph: ChainGraph): GraphProblems {
  const out: GraphProblems = { nodes: {}, edges: {}, other: [] };
  const add = (into: Record<string, string[]>, key: string, p: string) => (into[key] = [...(into[key] ?? []), p]);
  for (const p of problems) {
    if (p.nodeId !== undefined) {
      if (graph.nodes.some((n) => n.id === p.nodeId)) add(out.nodes, p.nodeId, p.text);
    } else if (p.connection) {
      const { fromId, toId, type } = p.connection;
      const edge = graph.edges.find((e) => e.source === fromId && e.target === toId && e.relation === type);
      if (edge) add(out.edges, edge.id, p.text);
    } else out.other.push(p.text);
  }
  return out;
}

/** Nodes copied from the canvas with the connections between them (what Ctrl+C keeps, Ctrl+V and Ctrl+D place). */
export interface GraphClip {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

/** The nodes `ids` of `graph` and the connections that run between two of them. */
export function clipOf(graph: ChainGraph, ids: readonly string[]): GraphClip {
  const picked = new Set(ids);
  return { nodes: graph.nodes.filter((n) => picked.has(n.id)), edges: graph.edges.filter((e) => picked.has(e.source) && picked.has(e.target)) };
}

/**
 * `graph` with a copy of `clip`: every node under a new id (`<type>_<n>`, as added ones get; its
 * name follows when it was the old id), moved by `offset`, the clip's connections between the
 * copies. Returns the new ids in clip order (the canvas selects them).
 */
export function pasteClip(graph: ChainGraph, clip: GraphClip, offset: Point): { graph: ChainGraph; ids: string[] } {
  let next = graph;
  const renamed = new Map<string, string>();
  for (const n of clip.nodes) {
    const id = freeNodeId(next, n.type);
    renamed.set(n.id, id);
    const doc: DslNode = { ...structuredClone(n.doc), id, ...(n.doc.name === undefined || n.doc.name === n.id ? { name: id } : {}) };
    next = { ...next, nodes: [...next.nodes, { id, type: n.type, position: { x: n.position.x + offset.x, y: n.position.y + offset.y }, doc }], firstId: next.firstId ?? id };
  }
  for (const e of clip.edges) {
    const source = renamed.get(e.source);
    const target = renamed.get(e.target);
    if (source !== undefined && target !== undefined) next = connect(next, source, target, e.relation);
  }
  return { graph: next, ids: [...renamed.values()] };
}

/** How far the nodes right of an insertion move to make room: a node's width and the layout's gap between columns. */
export const INSERT_SHIFT = 304;

/**
 * `graph` with node `id` put into connection `edge`: `a -(r)-> b` becomes `a -(r)-> id -(Success)-> b`.
 * On a connection that runs left to right the node takes b's place and b, with every other node
 * from b's column rightwards, moves one column right (no node ends up on another); on any other
 * the node goes to `position` (where it was dropped).
 */
function spliceInto(graph: ChainGraph, edge: GraphEdge, id: string, position: Point): ChainGraph {
  const from = graph.nodes.find((n) => n.id === edge.source) as GraphNode;
  const to = graph.nodes.find((n) => n.id === edge.target) as GraphNode;
  const forward = to.position.x > from.position.x;
  const moved = new Map<string, Point>(forward ? graph.nodes.filter((n) => n.id !== id && n.position.x >= to.position.x).map((n) => [n.id, { x: n.position.x + INSERT_SHIFT, y: n.position.y }]) : []);
  moved.set(id, forward ? to.position : position);
  const placed = moveNodes(graph, moved);
  const without = { ...placed, edges: placed.edges.filter((e) => e.id !== edge.id) };
  return connect(connect(without, edge.source, id, edge.relation), id, edge.target, 'Success');
}

/** The connection `edgeId` when both its ends are in `graph`. */
function edgeWithEnds(graph: ChainGraph, edgeId: string): GraphEdge | undefined {
  const edge = graph.edges.find((e) => e.id === edgeId);
  return edge && graph.nodes.some((n) => n.id === edge.source) && graph.nodes.some((n) => n.id === edge.target) ? edge : undefined;
}

/**
 * `graph` with a new node of `type` put into connection `edgeId` (see `spliceInto`). Unknown
 * edge: the node is only added at `position`.
 */
export function insertOnEdge(graph: ChainGraph, edgeId: string, type: string, position: Point): { graph: ChainGraph; id: string } {
  const edge = edgeWithEnds(graph, edgeId);
  const added = addNode(graph, type, position);
  return edge ? { graph: spliceInto(added.graph, edge, added.id, position), id: added.id } : added;
}

/**
 * `graph` with the existing node `nodeId`, dragged onto connection `edgeId`, put into it (see
 * `spliceInto`), or null when it cannot go there: the node has connections of its own (moving
 * them along would rewire more than the user pointed at), or it is an end of that connection.
 */
export function moveOntoEdge(graph: ChainGraph, edgeId: string, nodeId: string, position: Point): ChainGraph | null {
  const edge = edgeWithEnds(graph, edgeId);
  if (!edge || !graph.nodes.some((n) => n.id === nodeId)) return null;
  if (graph.edges.some((e) => e.source === nodeId || e.target === nodeId)) return null;
  return spliceInto(graph, edge, nodeId, position);
}
