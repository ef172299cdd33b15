import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScriptSandbox, createRuleMsg } from '../src/index.js';
import { chain, context, js, problemsOf, runner, type N } from './chain-helpers.js';

/** groupFilter: the cases of RuleGo's group_filter_node_test. */

let sandbox: ScriptSandbox;
beforeAll(() => {
  sandbox = new ScriptSandbox({ workers: 2 });
});
afterAll(() => sandbox.close());

const filters: N[] = [js('node1', 'jsFilter', 'return msg.temperature > 50;'), js('node2', 'jsFilter', 'return msg.humidity > 80;'), js('node3', 'jsFilter', 'return a')];
const group = (configuration: Record<string, unknown>) =>
  chain(
    'g',
    [{ id: 'g', type: 'groupFilter', configuration }, ...filters, { id: 'yes', type: 'end' }, { id: 'no', type: 'end' }, { id: 'failed', type: 'end' }],
    [['g', 'yes', 'True'], ['g', 'no', 'False'], ['g', 'failed', 'Failure']],
  );
const cold = () => createRuleMsg({ type: 'ACTIVITY_EVENT1', data: '{"temperature":41,"humidity":90}', metadata: { productType: 'test' } });
const hot = () => createRuleMsg({ type: 'ACTIVITY_EVENT1', data: '{"temperature":61,"humidity":90}', metadata: { productType: 'test' } });

async function relation(configuration: Record<string, unknown>, msg = hot()): Promise<string | undefined> {
  const result = await runner.run(group(configuration), msg, context(sandbox));
  return result.ends.map((e) => e.nodeId).join(',');
}

describe('groupFilter', () => {
  it('any: True when one node says True; a failing or missing node is not True', async () => {
    expect(await relation({ allMatches: false, nodeIds: 'node1,node2,node3,noFoundId', timeout: 10 }, cold())).toBe('yes');
    expect(await relation({ allMatches: false, nodeIds: 'node1,node2,node3,noFoundId' })).toBe('yes');
    expect(await relation({ nodeIds: ['node1', 'node3'] }, cold())).toBe('no');
  });

  it('allMatches: True only when every node says True', async () => {
    expect(await relation({ allMatches: true, nodeIds: 'node1,node2' })).toBe('yes');
    expect(await relation({ allMatches: true, nodeIds: 'node1,node2,node3,noFoundId' })).toBe('no');
    expect(await relation({ allMatches: true, nodeIds: ['node1', 'node2'] }, cold())).toBe('no');
  });

  it('goes along Failure without nodeIds', async () => {
    const result = await runner.run(group({ allMatches: false }), hot(), context(sandbox));
    expect(result.ends[0]?.nodeId).toBe('failed');
    expect(result.msg.metadata.error).toBe('nodeIds is empty');
  });

  it('runs only the listed nodes, not what they connect to, and passes the message on unchanged', async () => {
    const c = chain(
      'only',
      [{ id: 'g', type: 'groupFilter', configuration: { nodeIds: 'node1' } }, ...filters, js('after', 'jsTransform', 'return {msg: 1};'), { id: 'yes', type: 'end' }],
      [['g', 'yes', 'True'], ['node1', 'after', 'True']],
    );
    const input = hot();
    const result = await runner.run(c, input, context(sandbox));
    expect(result.trace.map((t) => t.nodeId).sort()).toEqual(['g', 'node1', 'yes']);
    expect(result.ends).toEqual([{ nodeId: 'yes', relation: undefined, msg: input }]);
  });

  it('goes along Failure at its timeout', async () => {
    const c = chain(
      'slow',
      [{ id: 'g', type: 'groupFilter', configuration: { nodeIds: 'wait', timeout: 1 } }, { id: 'wait', type: 'delay', configuration: { delayMs: 1500 } }, { id: 'failed', type: 'end' }],
      [['g', 'failed', 'Failure']],
    );
    const result = await runner.run(c, hot(), context(sandbox));
    expect(result.msg.metadata.error).toBe('timed out after 1 s waiting for wait');
  });

  it('checks its configuration', () => {
    expect(problemsOf({ id: 'g', type: 'groupFilter', configuration: { nodeIds: ['a'], allMatches: true, timeout: 5 } })).toEqual([]);
    expect(problemsOf({ id: 'g', type: 'groupFilter', configuration: { nodeIds: 5 } }).join('\n')).toMatch(/nodeIds/);
  });
});
