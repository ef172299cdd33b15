import dagre from '@dagrejs/dagre';
import type { ChainGraph, Point } from './chain-graph';

/**
 * Where the canvas puts nodes and how it draws connections. The layout is dagre's layered one,
 * left to right (a chain reads like a flow). The routes are orthogonal and ours: a connection
 * runs vertically only in the gaps between columns of nodes and crosses a column only at a
 * height no node of that column occupies, so it never passes under a node, whatever the
 * positions (laid out or dragged). Pure, so both are tested without a browser.
 */

export interface Box {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A node's size before React Flow measured it (the CSS gives nodes this width). */
export const NODE_SIZE = { width: 208, height: 72 };
const NODE_SEP = 48;
const RANK_SEP = 96;

/** Top-left positions of every node of `graph` by dagre (left to right), with `sizes` where measured. */
export function autoLayout(graph: ChainGraph, sizes: ReadonlyMap<string, { width: number; height: number }> = new Map()): Map<string, Point> {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: NODE_SEP, ranksep: RANK_SEP, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.id, { ...NODE_SIZE, ...sizes.get(n.id) });
  // The start node first, so that it is the leftmost of its rank even in a cycle.
  const ordered = [...graph.edges].sort((a, b) => Number(b.source === graph.firstId) - Number(a.source === graph.firstId));
  for (const e of ordered) if (e.source !== e.target) g.setEdge(e.source, e.target, {}, e.id);
  dagre.layout(g);
  const out = new Map<string, Point>();
  for (const n of graph.nodes) {
    const laid = g.node(n.id) as { x: number; y: number; width: number; height: number };
    out.set(n.id, { x: Math.round(laid.x - laid.width / 2), y: Math.round(laid.y - laid.height / 2) });
  }
  return out;
}

interface Column {
  left: number;
  right: number;
  boxes: Box[];
}

/** Nodes grouped into columns: boxes whose horizontal extents overlap (directly or through others) share one. */
export function columnsOf(boxes: readonly Box[]): Column[] {
  const sorted = [...boxes].sort((a, b) => a.x - b.x);
  const cols: Column[] = [];
  for (const b of sorted) {
    const last = cols[cols.length - 1];
    if (last && b.x <= last.right) {
      last.right = Math.max(last.right, b.x + b.width);
      last.boxes.push(b);
    } else cols.push({ left: b.x, right: b.x + b.width, boxes: [b] });
  }
  return cols;
}

const MARGIN = 14;

/** The height nearest `want` at which a horizontal line crosses `col` without touching a node (with a margin). */
function freeY(col: Column, want: number): number {
  const blocked = col.boxes.map((b) => [b.y - MARGIN, b.y + b.height + MARGIN] as const).sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const [top, bottom] of blocked) {
    const last = merged[merged.length - 1];
    if (last && top <= last[1]) last[1] = Math.max(last[1], bottom);
    else merged.push([top, bottom]);
  }
  const inside = merged.find(([top, bottom]) => want > top && want < bottom);
  if (!inside) return want;
  return want - inside[0] <= inside[1] - want ? inside[0] : inside[1];
}

/**
 * The corner points of a connection from `from` (the source's right handle) to `to` (the
 * target's left handle), between the boxes of all nodes. Vertical runs only in the gaps between
 * columns (or beyond the outer ones); columns crossed at a free height. A connection to a node in
 * the same or an earlier column goes out right and comes back round to the target's left side.
 */
export function routeEdge(from: Point, to: Point, sourceId: string, targetId: string, boxes: readonly Box[]): Point[] {
  const cols = columnsOf(boxes);
  const colOf = (id: string, at: Point) => {
    const i = cols.findIndex((c) => c.boxes.some((b) => b.id === id));
    return i >= 0 ? i : cols.findIndex((c) => at.x >= c.left && at.x <= c.right);
  };
  const si = colOf(sourceId, from);
  const ti = colOf(targetId, to);
  if (si < 0 || ti < 0) return [from, { x: (from.x + to.x) / 2, y: from.y }, { x: (from.x + to.x) / 2, y: to.y }, to];
  // The x of the gap right of column i (i = -1: left of the first one).
  const gapRight = (i: number): number => {
    const here = cols[i];
    const next = cols[i + 1];
    if (!here) return (next as Column).left - RANK_SEP / 4;
    if (!next) return here.right + RANK_SEP / 4;
    return (here.right + next.left) / 2;
  };
  const pts: Point[] = [from];
  let y = from.y;
  const goTo = (x: number, ny: number) => {
    pts.push({ x, y }, { x, y: ny });
    y = ny;
  };
  if (ti > si) {
    // Forward: cross the columns between, each at a free height near the straight line.
    for (let c = si + 1; c < ti; c++) {
      const col = cols[c] as Column;
      const mid = (col.left + col.right) / 2;
      const want = from.y + ((to.y - from.y) * (mid - from.x)) / (to.x - from.x || 1);
      goTo(gapRight(c - 1), freeY(col, want));
    }
    goTo(gapRight(ti - 1), to.y);
  } else {
    // Back (or within one column): out right of the source's column, then leftwards across
    // every column from there to the target's, into the gap left of the target's.
    goTo(gapRight(si), y);
    for (let c = si; c >= ti; c--) {
      const col = cols[c] as Column;
      const want = Math.max(...col.boxes.map((b) => b.y + b.height));
      goTo(c === si ? gapRight(si) : gapRight(c), freeY(col, want + MARGIN + 1));
    }
    goTo(gapRight(ti - 1), to.y);
  }
  pts.push(to);
  // Drop zero-length steps.
  return pts.filter((p, i) => i === 0 || p.x !== pts[i - 1]!.x || p.y !== pts[i - 1]!.y);
}

/** An SVG path through `points` with rounded corners, and where its label goes (the middle of its longest horizontal run). */
export function pathOf(points: readonly Point[]): { d: string; label: Point } {
  const r = 8;
  let d = `M ${points[0]!.x} ${points[0]!.y}`;
  for (let i = 1; i < points.length; i++) {
    const p = points[i]!;
    const prev = points[i - 1]!;
    const next = points[i + 1];
    if (!next) {
      d += ` L ${p.x} ${p.y}`;
      break;
    }
    const inLen = Math.hypot(p.x - prev.x, p.y - prev.y);
    const outLen = Math.hypot(next.x - p.x, next.y - p.y);
    const k = Math.min(r, inLen / 2, outLen / 2);
    const a = { x: p.x - ((p.x - prev.x) / (inLen || 1)) * k, y: p.y - ((p.y - prev.y) / (inLen || 1)) * k };
    const b = { x: p.x + ((next.x - p.x) / (outLen || 1)) * k, y: p.y + ((next.y - p.y) / (outLen || 1)) * k };
    d += ` L ${a.x} ${a.y} Q ${p.x} ${p.y} ${b.x} ${b.y}`;
  }
  let label = points[0]!;
  let best = -1;
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1]!;
    const b = points[i]!;
    if (a.y === b.y && Math.abs(b.x - a.x) > best) {
      best = Math.abs(b.x - a.x);
      label = { x: (a.x + b.x) / 2, y: a.y };
    }
  }
  return { d, label };
}
