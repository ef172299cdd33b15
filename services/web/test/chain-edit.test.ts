import { describe, expect, it } from 'vitest';
import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { chainGraph, clipOf, insertOnEdge, moveOntoEdge, pasteClip } from '../app/lib/chain-graph.js';
import { chainIssues } from '../app/lib/chain-validate.js';
import { familyOf } from '../app/lib/node-families.js';

/** The canvas's pure edits of issue 41: clipboard, insert on a connection, checks before Save, palette families. */

function dsl(): RuleChainDsl {
  return {
    ruleChain: { id: 'c', name: 'C' },
    metadata: {
      nodes: [
        { id: 'a', type: 'ai/agent', configuration: {}, additionalInfo: { layoutX: 0, layoutY: 0 } },
        { id: 'b', type: 'log', name: 'audit', configuration: { x: 1 }, additionalInfo: { layoutX: 300, layoutY: 0 } },
        { id: 'c', type: 'log', configuration: {}, additionalInfo: { layoutX: 600, layoutY: 0 } },
      ],
      connections: [
        { fromId: 'a', toId: 'b', type: 'Success' },
        { fromId: 'b', toId: 'c', type: 'Failure' },
      ],
    },
  };
}

const forms = {
  nodes: [
    { type: 'ai/agent', description: 'runs an agent', configuration: { type: 'object', properties: { maxStep: { type: 'integer', minimum: 1 } } } },
    { type: 'log', description: 'writes a log line', configuration: { type: 'object', properties: {} } },
    {
      type: 'restApiCall',
      description: 'calls an HTTP endpoint',
      configuration: { type: 'object', required: ['restEndpointUrlPattern'], properties: { restEndpointUrlPattern: { type: 'string', minLength: 1 }, headers: { type: 'object', properties: { auth: { type: 'string' } }, required: ['auth'] } } },
    },
  ],
  tools: [],
  toolKinds: [],
  toolKindForms: [],
  toolEntry: {},
} as unknown as ToolForms;

describe('copy and paste', () => {
  it('pastes copies under new ids, offset, with only the connections between copied nodes', () => {
    const g = chainGraph(dsl());
    const clip = clipOf(g, ['b', 'c']);
    expect(clip.edges.map((e) => `${e.source}>${e.target}`)).toEqual(['b>c']);
    const { graph, ids } = pasteClip(g, clip, { x: 40, y: 100 });
    expect(ids).toEqual(['log_1', 'log_2']);
    const pasted = graph.nodes.filter((n) => ids.includes(n.id));
    expect(pasted.map((n) => [n.position.x, n.position.y])).toEqual([
      [340, 100],
      [640, 100],
    ]);
    // A name of its own stays; a name that was the id follows the new id; the configuration is a copy.
    expect(pasted.map((n) => n.doc.name)).toEqual(['audit', 'log_2']);
    expect(pasted[0]!.doc.configuration).toEqual({ x: 1 });
    expect(pasted[0]!.doc.configuration).not.toBe(g.nodes[1]!.doc.configuration);
    expect(graph.edges.map((e) => `${e.source}-${e.relation}>${e.target}`)).toEqual(['a-Success>b', 'b-Failure>c', 'log_1-Failure>log_2']);
    // Pasting again gives further new ids.
    expect(pasteClip(graph, clip, { x: 80, y: 200 }).ids).toEqual(['log_3', 'log_4']);
  });
});

describe('insert on a connection', () => {
  it('puts the new node between the two ends, keeping the relation into it', () => {
    const g = chainGraph(dsl());
    const { graph, id } = insertOnEdge(g, g.edges[1]!.id, 'restApiCall', { x: 450, y: 0 });
    expect(id).toBe('restApiCall_1');
    expect(graph.edges.map((e) => `${e.source}-${e.relation}>${e.target}`)).toEqual(['a-Success>b', 'b-Failure>restApiCall_1', 'restApiCall_1-Success>c']);
    // Left to right: the new node takes c's place, c moves a column right; nodes left of it stay.
    expect(graph.nodes.map((n) => `${n.id}@${n.position.x},${n.position.y}`)).toEqual(['a@0,0', 'b@300,0', 'c@904,0', 'restApiCall_1@600,0']);
  });

  it('puts the node where it was dropped on a connection that runs back', () => {
    const d = dsl();
    d.metadata.connections.push({ fromId: 'c', toId: 'a', type: 'Failure' });
    const g = chainGraph(d);
    const { graph } = insertOnEdge(g, g.edges[2]!.id, 'log', { x: 300, y: 200 });
    expect(graph.nodes.map((n) => `${n.id}@${n.position.x},${n.position.y}`)).toEqual(['a@0,0', 'b@300,0', 'c@600,0', 'log_1@300,200']);
    expect(graph.edges.map((e) => `${e.source}-${e.relation}>${e.target}`)).toEqual(['a-Success>b', 'b-Failure>c', 'c-Failure>log_1', 'log_1-Success>a']);
  });
});

describe('move an existing node onto a connection', () => {
  it('puts a node without connections between the two ends, in the downstream node\'s place', () => {
    const d = dsl();
    d.metadata.nodes.push({ id: 'loose', type: 'log', configuration: { keep: true }, additionalInfo: { layoutX: 300, layoutY: 300 } });
    const g = chainGraph(d);
    const next = moveOntoEdge(g, g.edges[0]!.id, 'loose', { x: 150, y: 10 });
    expect(next?.edges.map((e) => `${e.source}-${e.relation}>${e.target}`)).toEqual(['b-Failure>c', 'a-Success>loose', 'loose-Success>b']);
    // b's column and those right of it move right; the node keeps its id and configuration.
    expect(next?.nodes.map((n) => `${n.id}@${n.position.x},${n.position.y}`)).toEqual(['a@0,0', 'b@604,0', 'c@904,0', 'loose@300,0']);
    expect(next?.nodes[3]!.doc.configuration).toEqual({ keep: true });
  });

  it('refuses a node that has connections of its own, an unknown node and an unknown connection', () => {
    const d = dsl();
    d.metadata.nodes.push({ id: 'loose', type: 'log', configuration: {} });
    const g = chainGraph(d);
    expect(moveOntoEdge(g, g.edges[1]!.id, 'a', { x: 0, y: 0 })).toBeNull();
    expect(moveOntoEdge(g, g.edges[0]!.id, 'nope', { x: 0, y: 0 })).toBeNull();
    expect(moveOntoEdge(g, 'nope', 'loose', { x: 0, y: 0 })).toBeNull();
  });
});

describe('checks before Save', () => {
  it('blocks a missing required setting and an out-of-range number, notes an unreached node', () => {
    const d = dsl();
    d.metadata.nodes[0]!.configuration = { maxStep: 0 };
    const g = insertOnEdge(chainGraph(d), 'nope', 'restApiCall', { x: 0, y: 200 }).graph;
    const issues = chainIssues(g, forms).map((i) => `${i.nodeId} ${i.blocker ? 'blocker' : 'note'}: ${i.text}`);
    expect(issues).toEqual([
      'a blocker: Max steps (model calls per answer): a whole number, at least 1',
      'restApiCall_1 blocker: Rest endpoint URL pattern: required',
      'restApiCall_1 note: Not reached from the start node: connect something to it',
    ]);
  });

  it('checks a nested object\'s required keys only when it is there, and knows no unknown type', () => {
    const d = dsl();
    d.metadata.nodes.push({ id: 'r', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'https://x', headers: {} } }, { id: 'z', type: 'mystery', configuration: {} });
    d.metadata.connections.push({ fromId: 'c', toId: 'r', type: 'Success' }, { fromId: 'r', toId: 'z', type: 'Success' });
    const issues = chainIssues(chainGraph(d), forms).map((i) => `${i.nodeId}: ${i.text}`);
    expect(issues).toEqual(['r: Headers › Auth: required', 'z: Unknown node type "mystery": this server has no such node']);
    d.metadata.nodes[3]!.configuration = { restEndpointUrlPattern: 'https://x' };
    expect(chainIssues(chainGraph(d), forms).map((i) => i.nodeId)).toEqual(['z']);
  });
});

describe('palette families', () => {
  it('groups node types by what their names say', () => {
    expect(['ai/agent', 'jsFilter', 'switch', 'msgTypeSwitch', 'exprTransform', 'fork', 'restApiCall', 'comment'].map(familyOf)).toEqual(['AI', 'Filters', 'Routing', 'Routing', 'Transforms', 'Flow control', 'Actions', 'Other']);
  });
});
