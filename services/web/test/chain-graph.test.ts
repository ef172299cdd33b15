import { describe, expect, it } from 'vitest';
import type { RuleChainDsl } from '@agentry/client';
import { addNode, anchorProblems, nextPosition, chainDsl, chainGraph, connect, editNode, layeredLayout, moveNodes, problemsByElement, removeElements, setRelation, LAYER_GAP, ROW_GAP } from '../app/lib/chain-graph.js';
import { fmtMs, parseSteps, replayOf, stepFailed, stepOfNode, type RunStep } from '../app/lib/chain-replay.js';

/** A chain as RuleGo and TpClaw write them: keys the editor does not know at every level, some positions stored. */
function sample(): RuleChainDsl {
  return {
    ruleChain: { id: 'support', name: 'Support', debugMode: false, root: true, additionalInfo: { description: 'kept' }, configuration: { vars: { a: '1' } } },
    metadata: {
      firstNodeIndex: 0,
      nodes: [
        { id: 's1', type: 'jsFilter', name: 'is it?', debugMode: true, configuration: { jsScript: 'return true;' }, additionalInfo: { description: 'filter', layoutX: 10, layoutY: 20 } },
        { id: 's2', type: 'ai/agent', name: 'agent', configuration: { systemPrompt: 'hi', maxStep: 5 }, extraKey: [1, { b: 2 }] } as RuleChainDsl['metadata']['nodes'][number],
        { id: 's3', type: 'log', configuration: { jsScript: 'return msg;' } },
        { id: 's4', type: 'end' },
      ],
      connections: [
        { fromId: 's1', toId: 's2', type: 'True' },
        { fromId: 's1', toId: 's3', type: 'False', label: 'kept too' } as RuleChainDsl['metadata']['connections'][number],
        { fromId: 's2', toId: 's4', type: 'Success' },
      ],
      ruleChainConnections: [],
    } as RuleChainDsl['metadata'],
  };
}

const stripPositions = (dsl: RuleChainDsl): unknown =>
  JSON.parse(JSON.stringify(dsl), (key, value: unknown) => {
    if (value && typeof value === 'object' && !Array.isArray(value) && ('layoutX' in value || 'layoutY' in value)) {
      const { layoutX: _x, layoutY: _y, ...rest } = value as Record<string, unknown>;
      // An additionalInfo the positions created goes with them.
      return key === 'additionalInfo' && Object.keys(rest).length === 0 ? undefined : rest;
    }
    return value;
  });

describe('chain DSL <-> graph', () => {
  it('writes back a chain loaded without edits as the same bytes', () => {
    const dsl = sample();
    const text = JSON.stringify(dsl);
    expect(JSON.stringify(chainDsl(dsl, chainGraph(dsl)))).toBe(text);
    expect(JSON.stringify(chainDsl(dsl, chainGraph(dsl), { positions: true }))).not.toBe(text);
    // With positions, only RuleGo's layout keys differ; a node's stored position comes back unchanged.
    const withPositions = chainDsl(dsl, chainGraph(dsl), { positions: true });
    expect(JSON.stringify(stripPositions(withPositions))).toBe(JSON.stringify(stripPositions(dsl)));
    expect(withPositions.metadata.nodes[0]).toBe(dsl.metadata.nodes[0]);
    expect(withPositions.metadata.nodes[1]!.additionalInfo).toEqual({ layoutX: LAYER_GAP, layoutY: 0 });
    // And a chain saved with positions loads at them and writes back as the same bytes again.
    expect(JSON.stringify(chainDsl(withPositions, chainGraph(withPositions), { positions: true }))).toBe(JSON.stringify(withPositions));
  });

  it('keeps a DSL without firstNodeIndex without it, and draws it from the stored or layered positions', () => {
    const dsl = sample();
    delete (dsl.metadata as { firstNodeIndex?: number }).firstNodeIndex;
    const graph = chainGraph(dsl);
    expect(JSON.stringify(chainDsl(dsl, graph))).toBe(JSON.stringify(dsl));
    expect(graph.nodes.map((n) => [n.id, n.position])).toEqual([
      ['s1', { x: 10, y: 20 }],
      ['s2', { x: LAYER_GAP, y: 0 }],
      ['s3', { x: LAYER_GAP, y: ROW_GAP }],
      ['s4', { x: 2 * LAYER_GAP, y: 0 }],
    ]);
    expect(graph.edges.map((e) => `${e.source}-${e.relation}->${e.target}`)).toEqual(['s1-True->s2', 's1-False->s3', 's2-Success->s4']);
  });

  it('lays out nodes nothing reaches in a last column', () => {
    expect([...layeredLayout(['a', 'b', 'c'], [{ fromId: 'a', toId: 'b' }], 'a').entries()]).toEqual([
      ['a', { x: 0, y: 0 }],
      ['b', { x: LAYER_GAP, y: 0 }],
      ['c', { x: 2 * LAYER_GAP, y: 0 }],
    ]);
  });

  it('builds a three-node chain from nothing as the DSL the gateway takes', () => {
    const empty: RuleChainDsl = { ruleChain: { id: 'x', name: 'X' }, metadata: { nodes: [], connections: [] } };
    let g = chainGraph(empty);
    const a = addNode(g, 'jsFilter', { x: 0, y: 0 });
    const b = addNode(a.graph, 'ai/agent', { x: 260, y: 0 });
    const c = addNode(b.graph, 'log', nextPosition(b.graph));
    g = connect(connect(c.graph, a.id, b.id, 'True'), b.id, c.id, 'Success');
    expect(connect(g, a.id, b.id, 'True')).toBe(g);
    expect(connect(g, a.id, 'nope', 'True')).toBe(g);
    g = editNode(g, b.id, (d) => ({ ...d, configuration: { systemPrompt: 'be brief' } }));
    expect(chainDsl(empty, g, { positions: true })).toEqual({
      ruleChain: { id: 'x', name: 'X' },
      metadata: {
        nodes: [
          { id: 'jsFilter_1', type: 'jsFilter', name: 'jsFilter_1', configuration: {}, additionalInfo: { layoutX: 0, layoutY: 0 } },
          { id: 'agent_1', type: 'ai/agent', name: 'agent_1', configuration: { systemPrompt: 'be brief' }, additionalInfo: { layoutX: 260, layoutY: 0 } },
          { id: 'log_1', type: 'log', name: 'log_1', configuration: {}, additionalInfo: { layoutX: 260 + LAYER_GAP, layoutY: 0 } },
        ],
        connections: [
          { fromId: 'jsFilter_1', toId: 'agent_1', type: 'True' },
          { fromId: 'agent_1', toId: 'log_1', type: 'Success' },
        ],
      },
    });
  });

  it('edits relations, moves, removes, and keeps firstNodeIndex on the start node', () => {
    const dsl = sample();
    let g = setRelation(chainGraph(dsl), 'c1', 'Other');
    g = moveNodes(g, new Map([['s3', { x: 5.4, y: 6.6 }]]));
    let out = chainDsl(dsl, g, { positions: true });
    expect(out.metadata.connections[1]).toEqual({ fromId: 's1', toId: 's3', type: 'Other', label: 'kept too' });
    expect(out.metadata.nodes[2]!.additionalInfo).toEqual({ layoutX: 5, layoutY: 7 });
    g = removeElements(g, ['s1'], []);
    out = chainDsl(dsl, g);
    expect(out.metadata.nodes.map((n) => n.id)).toEqual(['s2', 's3', 's4']);
    expect(out.metadata.connections).toEqual([{ fromId: 's2', toId: 's4', type: 'Success' }]);
    expect(out.metadata.firstNodeIndex).toBe(0);
    out = chainDsl(dsl, { ...g, firstId: 's4' });
    expect(out.metadata.firstNodeIndex).toBe(2);
    expect(removeElements(chainGraph(dsl), [], ['c0']).edges.map((e) => e.id)).toEqual(['c1', 'c2']);
  });

  it('puts the gateway problems on the node or connection they name', () => {
    const g = chainGraph(sample());
    const p = problemsByElement(
      anchorProblems(['Invalid input: metadata.nodes[1] ("s2"), ai/agent: configuration.maxStep: must be >= 1', 'metadata.nodes[2].configuration: bad', 'metadata.connections[2]: toId "zz" is not a node of this chain', 'ruleChain.name: must not be empty'], sample()),
      g,
    );
    expect(p).toEqual({
      nodes: { s2: ['Invalid input: metadata.nodes[1] ("s2"), ai/agent: configuration.maxStep: must be >= 1'], s3: ['metadata.nodes[2].configuration: bad'] },
      edges: { c2: ['metadata.connections[2]: toId "zz" is not a node of this chain'] },
      other: ['ruleChain.name: must not be empty'],
    });
  });

  it('keeps a save\'s problems on the node and connection the indices named when it was sent, after edits move them', () => {
    const sent = sample();
    const anchored = anchorProblems(['metadata.nodes[2].configuration: bad', 'metadata.nodes[0] ("s1"), jsFilter: gone with its node', 'metadata.connections[2]: bad relation', 'metadata.nodes[9]: no such node'], sent);
    expect(anchored.map((a) => a.nodeId ?? a.connection?.toId)).toEqual(['s3', 's1', 's4', undefined]);
    // s1 deleted: s3 is nodes[1] and s2 -> s4 connections[0] now; what was said of s1 goes with it.
    const after = removeElements(chainGraph(sent), ['s1'], []);
    expect(problemsByElement(anchored, after)).toEqual({ nodes: { s3: ['metadata.nodes[2].configuration: bad'] }, edges: { c2: ['metadata.connections[2]: bad relation'] }, other: ['metadata.nodes[9]: no such node'] });
    // The same chain read back from the DSL (edge ids renumbered): found by its ends and relation.
    expect(problemsByElement(anchored, chainGraph(chainDsl(sent, after))).edges).toEqual({ c0: ['metadata.connections[2]: bad relation'] });
  });
});

describe('replaying a run', () => {
  it('marks the nodes that ran, their relations and times, and the edges followed', () => {
    const g = chainGraph(sample());
    const parsed = parseSteps({
      steps: [
        { nodeId: 's1', type: 'jsFilter', relations: ['True'], ms: 2 },
        { nodeId: 's2', type: 'ai/agent', relations: ['Success'], ms: 40, debug: { chainId: 'support', in: { data: 'q' }, out: { data: 'a' } } },
        { nodeId: 's4', type: 'end', relations: [], ms: 0 },
        { nodeId: 'gone', relations: [], ms: 1 },
        { nodeId: 's1', type: 'jsFilter', relations: ['True'], ms: 1, debug: { chainId: 'support', redacted: true } },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(parsed.steps[1]!.debug).toEqual({ in: { data: 'q' }, out: { data: 'a' } });
    // Another principal's run: the gateway left the messages out and says so.
    expect(parsed.steps[4]!.debug).toEqual({ redacted: true });
    parsed.steps.pop();
    const r = replayOf(g, parsed.steps);
    expect(r.nodes).toEqual({
      s1: { order: [1], relations: ['True'], ms: 2, error: undefined, failed: false },
      s2: { order: [2], relations: ['Success'], ms: 40, error: undefined, failed: false },
      s4: { order: [3], relations: [], ms: 0, error: undefined, failed: false },
    });
    expect(r.edges).toEqual(['c0', 'c2']);
    expect(r.unknown).toEqual(['gone']);
    expect(r.totalMs).toBe(43);
    expect(parseSteps({ nope: 1 })).toEqual({ ok: false, problem: 'expected a list of steps, or an object with "steps"' });
    expect(parseSteps([{ relations: [] }])).toEqual({ ok: false, problem: 'step 1 has no "nodeId"' });
  });
});

describe('a failed run replayed', () => {
  const steps: RunStep[] = [
    { nodeId: 's1', type: 'jsFilter', relations: ['True'], ms: 2 },
    { nodeId: 's3', type: 'log', relations: ['Success'], ms: 1 },
    { nodeId: 's3', type: 'log', relations: ['Failure'], ms: 4, error: 'boom' },
    { nodeId: 's2', type: 'ai/agent', relations: ['Failure'], ms: 9 },
  ];

  it('marks a step failed by its error or its Failure relation, and the node with it', () => {
    expect(steps.map(stepFailed)).toEqual([false, false, true, true]);
    const r = replayOf(chainGraph(sample()), steps);
    expect(r.nodes.s1!.failed).toBe(false);
    expect(r.nodes.s3).toEqual({ order: [2, 3], relations: ['Success', 'Failure'], ms: 5, error: 'boom', failed: true });
    expect(r.nodes.s2).toMatchObject({ failed: true, error: undefined });
  });

  it("picks a clicked node's step: the one chosen when it is that node's, else its failure, else its first", () => {
    expect(stepOfNode(steps, 's3', 1)).toBe(1);
    expect(stepOfNode(steps, 's3', 0)).toBe(2);
    expect(stepOfNode(steps, 's3', null)).toBe(2);
    expect(stepOfNode(steps, 's1', null)).toBe(0);
    expect(stepOfNode(steps, 's4', 3)).toBeUndefined();
  });

  it('writes durations people read', () => {
    expect([0.44, 3, 12.6, 999, 1840, 125_000].map(fmtMs)).toEqual(['0.4 ms', '3 ms', '13 ms', '999 ms', '1.8 s', '2 min 5 s']);
  });
});
