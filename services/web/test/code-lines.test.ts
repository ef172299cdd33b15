import { describe, expect, it } from 'vitest';
import { jsonSyntaxProblem, lineOf, placeProblems, problemPath } from '../app/lib/code-lines.js';

/** The DSL tab's problems on their line (issue 41): syntax errors by offset, the gateway's and the canvas's by path or node. */

const DSL = JSON.stringify(
  {
    ruleChain: { id: 'c', name: 'C' },
    metadata: {
      nodes: [
        { id: 'a', type: 'ai/agent', configuration: {} },
        { id: 'r', type: 'restApiCall', configuration: { headers: { x: '1' } } },
        { id: 'd', type: 'delay', configuration: { period: 5 } },
      ],
      connections: [{ fromId: 'a', toId: 'r', type: 'Success' }],
    },
  },
  null,
  2,
);
const lineAt = (text: string, needle: string) => lineOf(text, text.indexOf(needle));

describe('JSON syntax errors', () => {
  it('puts a missing comma, a trailing comma and an early end on their line', () => {
    const missing = '{\n  "a": 1\n  "b": 2\n}';
    expect(lineOf(missing, jsonSyntaxProblem(missing)!.from)).toBe(3);
    // V8 names no position for this one; the scan finds it.
    const trailing = '{\n  "a": [\n    1,\n  ]\n}';
    expect(lineOf(trailing, jsonSyntaxProblem(trailing)!.from)).toBe(4);
    const cut = '{\n  "a": {\n';
    const p = jsonSyntaxProblem(cut)!;
    expect(p.from).toBe(cut.length);
    expect(p.message).toMatch(/^Not valid JSON: /);
    expect(p.message).not.toMatch(/position/);
    expect(jsonSyntaxProblem(DSL)).toBeNull();
  });
});

describe('problems by path', () => {
  it('reads the node, the setting and an unknown field out of the gateway\'s text', () => {
    expect(problemPath('Invalid input: metadata.nodes[1] ("r"), restApiCall: configuration: must have required properties restEndpointUrlPattern')).toEqual(['metadata', 'nodes', '1', 'configuration']);
    expect(problemPath('metadata.nodes[1] ("r"), restApiCall: configuration.headers.x: must be number')).toEqual(['metadata', 'nodes', '1', 'configuration', 'headers', 'x']);
    expect(problemPath('metadata.nodes[2] ("d"), delay: configuration: unknown field "period" (did you mean delayMs?)')).toEqual(['metadata', 'nodes', '2', 'configuration', 'period']);
    expect(problemPath('metadata.connections[0]: unknown node')).toEqual(['metadata', 'connections', '0']);
    expect(problemPath('ruleChain.name: must not be empty')).toEqual(['ruleChain', 'name']);
    expect(problemPath('something else')).toEqual([]);
  });

  it('places each problem on the line of what it names, a canvas issue on its node\'s line', () => {
    const placed = placeProblems(DSL, [
      { text: 'Invalid input: metadata.nodes[1] ("r"), restApiCall: configuration.headers.x: must be number', severity: 'error' },
      { text: 'metadata.nodes[2] ("d"), delay: configuration: unknown field "period"', severity: 'warning' },
      { text: 'Rest endpoint URL pattern: required', severity: 'error', nodeId: 'r' },
      { text: 'ruleChain.name: too short', severity: 'error' },
      { text: 'no place at all', severity: 'error' },
    ]);
    expect(placed.map((p) => lineOf(DSL, p.from))).toEqual([lineAt(DSL, '"x": "1"'), lineAt(DSL, '"period"'), lineAt(DSL, '"id": "r"'), lineAt(DSL, '"name": "C"'), 1]);
    expect(placed.map((p) => p.severity)).toEqual(['error', 'warning', 'error', 'error', 'error']);
    // The path prefix goes: the line says where.
    expect(placed[0]!.message).toBe('restApiCall: configuration.headers.x: must be number');
    // One line underlined, not the whole node.
    expect(DSL.slice(placed[1]!.from, placed[1]!.to)).toBe('"period": 5');
  });

  it('falls back to the deepest part that exists and shows only the syntax error of text that does not parse', () => {
    const [p] = placeProblems(DSL, [{ text: 'metadata.nodes[0] ("a"), ai/agent: configuration.maxStep: must be >= 1', severity: 'error' }]);
    expect(lineOf(DSL, p!.from)).toBe(lineAt(DSL, '"configuration": {}'));
    const broken = DSL.replace('"type": "delay",', '"type": "delay"');
    const only = placeProblems(broken, [{ text: 'metadata.nodes[2]: x', severity: 'error' }]);
    expect(only).toHaveLength(1);
    // The comma is missing after "delay": the next key, a line down, is where it shows.
    expect(lineOf(broken, only[0]!.from)).toBe(lineAt(broken, '"type": "delay"') + 1);
  });

  it('places a save\'s problem by the node or connection it was about, wherever that is now, and drops it when that is gone', () => {
    // Sent with r at nodes[1] and d at nodes[2]; a, the first node, deleted since: r is nodes[0], d nodes[1].
    const now = JSON.stringify({ ...JSON.parse(DSL), metadata: { nodes: (JSON.parse(DSL) as { metadata: { nodes: unknown[] } }).metadata.nodes.slice(1), connections: [{ fromId: 'r', toId: 'd', type: 'Success' }] } }, null, 2);
    const placed = placeProblems(now, [
      { text: 'metadata.nodes[1] ("r"), restApiCall: configuration.headers.x: must be number', severity: 'error', nodeId: 'r' },
      { text: 'metadata.nodes[2] ("d"), delay: configuration: unknown field "period"', severity: 'warning', nodeId: 'd' },
      { text: 'metadata.nodes[0] ("a"), ai/agent: configuration: bad', severity: 'error', nodeId: 'a' },
      { text: 'metadata.connections[3]: bad', severity: 'error', connection: { fromId: 'r', toId: 'd', type: 'Success' } },
      { text: 'metadata.connections[0]: bad', severity: 'error', connection: { fromId: 'a', toId: 'r', type: 'Success' } },
    ]);
    expect(placed.map((p) => lineOf(now, p.from))).toEqual([lineAt(now, '"x": "1"'), lineAt(now, '"period"'), lineAt(now, '"fromId": "r"') - 1]);
  });
});
