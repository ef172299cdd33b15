import { describe, expect, it } from 'vitest';
import { autoLayout, routeEdge, type Box } from '../app/lib/chain-layout.js';
import type { ChainGraph } from '../app/lib/chain-graph.js';

/** Whether any segment of `pts` enters a box other than the two it joins. */
function crossings(pts: ReadonlyArray<{ x: number; y: number }>, boxes: readonly Box[], ends: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1]!;
    const b = pts[i]!;
    for (let s = 0; s <= 20; s++) {
      const p = { x: a.x + ((b.x - a.x) * s) / 20, y: a.y + ((b.y - a.y) * s) / 20 };
      for (const box of boxes) if (!ends.includes(box.id) && p.x > box.x && p.x < box.x + box.width && p.y > box.y && p.y < box.y + box.height) out.push(box.id);
    }
  }
  return out;
}

const graphOf = (ids: string[], edges: Array<[string, string]>): ChainGraph => ({
  nodes: ids.map((id) => ({ id, type: 'log', position: { x: 0, y: 0 }, doc: { id, type: 'log' } })),
  edges: edges.map(([source, target], i) => ({ id: `c${i}`, source, target, relation: 'Success', doc: { fromId: source, toId: target, type: 'Success' } })),
  firstId: ids[0],
});

describe('the canvas layout and routes', () => {
  it('lays a chain out left to right and routes long, back and same-column connections round every node', () => {
    const g = graphOf(['a', 'b', 'c', 'd', 'e'], [['a', 'b'], ['b', 'c'], ['c', 'd'], ['a', 'd'], ['d', 'b'], ['a', 'e']]);
    const pos = autoLayout(g);
    expect(pos.get('b')!.x).toBeGreaterThan(pos.get('a')!.x);
    expect(pos.get('d')!.x).toBeGreaterThan(pos.get('c')!.x);
    const boxes: Box[] = [...pos].map(([id, p]) => ({ id, ...p, width: 208, height: 72 }));
    const box = (id: string) => boxes.find((b) => b.id === id)!;
    for (const [s, t] of [['a', 'd'], ['d', 'b'], ['a', 'b'], ['a', 'e']] as const) {
      const from = { x: box(s).x + 208, y: box(s).y + 36 };
      const to = { x: box(t).x, y: box(t).y + 36 };
      const pts = routeEdge(from, to, s, t, boxes);
      expect(crossings(pts, boxes, [s, t]), `${s} -> ${t}`).toEqual([]);
    }
    // Three in a row: the straight line from the first to the third passes under the second; the route does not.
    const row: Box[] = ['x', 'y', 'z'].map((id, i) => ({ id, x: i * 300, y: 0, width: 208, height: 72 }));
    const [from, to] = [{ x: 208, y: 36 }, { x: 600, y: 36 }];
    expect(crossings([from, to], row, ['x', 'z'])).not.toEqual([]);
    expect(crossings(routeEdge(from, to, 'x', 'z', row), row, ['x', 'z'])).toEqual([]);
    // Two nodes in one column, the lower one above an obstacle in the next: still clear.
    const stacked: Box[] = [
      { id: 'p', x: 0, y: 0, width: 208, height: 72 },
      { id: 'q', x: 0, y: 150, width: 208, height: 72 },
    ];
    expect(crossings(routeEdge({ x: 208, y: 36 }, { x: 0, y: 186 }, 'p', 'q', stacked), stacked, ['p', 'q'])).toEqual([]);
  });
});
