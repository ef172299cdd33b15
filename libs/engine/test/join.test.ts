import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScriptSandbox, createRuleMsg } from '../src/index.js';
import { type ParsedChain } from '@agentry/definitions';
import { chain, context, data, js, logLines, problemsOf, runError, runner, type C, type N } from './chain-helpers.js';

/** join: merges the branches below their common ancestor, as RuleGo's join_node and engine tests. */

let sandbox: ScriptSandbox;
beforeAll(() => {
  sandbox = new ScriptSandbox({ workers: 2 });
});
afterAll(() => sandbox.close());

const set = (field: string, value: string) => `msg.${field} = ${JSON.stringify(value)}; return {msg, metadata, msgType};`;
const fork: N = { id: 'f', type: 'fork' };
const join = (configuration: Record<string, unknown> = {}, id = 'j'): N => ({ id, type: 'join', configuration });
type Item = { msg: { data: string; metadata: Record<string, string>; type: string }; err: string; nodeId: string };

const timesRun = (c: { trace: Array<{ nodeId: string }> }, id: string) => c.trace.filter((t) => t.nodeId === id).length;

describe('join', () => {
  // testdata/rule/test_join_node.json of rulego/rulego, run as engine_test.go's TestJoinNode does.
  const joinNode = chain(
    'frcYgBtVbDaV',
    [js('node_a', 'jsTransform', set('a', 'aa')), js('node_b', 'jsTransform', set('b', 'bb')), js('node_c', 'jsTransform', set('c', 'cc')), join({ timeout: 1 }, 'node_d')],
    [['node_a', 'node_b', 'Success'], ['node_a', 'node_c', 'Success'], ['node_b', 'node_d', 'Success'], ['node_c', 'node_d', 'Success']],
  );

  it('waits for both branches of a fan-out and lists their messages (test_join_node.json)', async () => {
    const input = createRuleMsg({ type: 'TEST_MSG_TYPE1', data: '{"temperature":41,"humidity":90}', metadata: { productType: 'test01' } });
    const result = await runner.run(joinNode, input, context(sandbox));
    expect(result.ends.map((e) => [e.nodeId, e.relation])).toEqual([['node_d', 'Success']]);
    expect(timesRun(result, 'node_d')).toBe(1);
    const items = data(result.msg) as Item[];
    expect(items).toHaveLength(2);
    expect(items.map((i) => i.nodeId)).toEqual(['node_b', 'node_c']);
    expect(items.map((i) => JSON.parse(i.msg.data))).toEqual([
      { temperature: 41, humidity: 90, a: 'aa', b: 'bb' },
      { temperature: 41, humidity: 90, a: 'aa', c: 'cc' },
    ]);
    expect(items.every((i) => i.err === '' && JSON.stringify(i.msg.metadata) === '{}' && i.msg.type === 'TEST_MSG_TYPE1')).toBe(true);
    expect(result.msg).toMatchObject({ id: input.id, type: 'TEST_MSG_TYPE1', metadata: { productType: 'test01' } });
  });

  it('merges the one branch a filter chose (test_join_multi_branch.json)', async () => {
    const pass = "return {'msg':msg,'metadata':metadata,'msgType':msgType,'dataType':dataType};";
    const c = chain(
      'multiBranchJoinTest',
      [js('node_2', 'jsFilter', 'return msg.temperature > 50;'), js('node_4', 'jsTransform', pass), js('node_5', 'jsTransform', pass), join({ timeout: 0 }, 'node_7')],
      [['node_2', 'node_4', 'True'], ['node_2', 'node_5', 'False'], ['node_4', 'node_7', 'Success'], ['node_5', 'node_7', 'Success']],
    );
    for (const [temperature, from] of [[60, 'node_4'], [20, 'node_5']] as const) {
      const result = await runner.run(c, createRuleMsg({ type: 'HIGH_TEMP_TEST', data: { temperature } }), context(sandbox));
      expect(result.ends.map((e) => [e.nodeId, e.relation])).toEqual([['node_7', 'Success']]);
      expect((data(result.msg) as Item[]).map((i) => i.nodeId)).toEqual([from]);
    }
  });

  it('merges a fork straight into a join with a delayed branch (test_fork_direct_join.json)', async () => {
    const c = chain(
      'test_fork_direct_join',
      [{ id: 'node_fork', type: 'fork' }, { id: 'node_delay', type: 'delay', configuration: { delayMs: 100 } }, join({ timeout: 5, mergeToMap: false }, 'node_join')],
      [['node_fork', 'node_join', 'Success'], ['node_fork', 'node_delay', 'Success'], ['node_delay', 'node_join', 'Success']],
    );
    const result = await runner.run(c, createRuleMsg({ data: '{"x":1}' }), context());
    expect(timesRun(result, 'node_join')).toBe(1);
    expect((data(result.msg) as Item[]).map((i) => i.nodeId)).toEqual(['node_fork', 'node_delay']);
  });

  it('mergeToMap merges JSON objects key by key and puts anything else under its node id (join_node_test MergeToMap)', async () => {
    const c = chain(
      'map',
      [fork, js('node1', 'jsTransform', 'return {msg: {a: 1, b: 2}};'), js('node2', 'jsTransform', 'return {msg: {c: 3}};'), js('node3', 'jsTransform', "return {msg: 'not json'};"), join({ mergeToMap: true })],
      [['f', 'node1', 'Success'], ['f', 'node2', 'Success'], ['f', 'node3', 'Success'], ['node1', 'j', 'Success'], ['node2', 'j', 'Success'], ['node3', 'j', 'Success']],
    );
    const result = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox));
    expect(data(result.msg)).toEqual({ a: 1, b: 2, c: 3, node3: 'not json' });
  });

  it("keeps the first message's metadata plus every successful branch's", async () => {
    const c = chain(
      'meta',
      [fork, js('m1', 'jsTransform', "metadata.one = '1'; return {metadata};"), js('m2', 'jsTransform', "metadata.two = '2'; return {metadata};"), join()],
      [['f', 'm1', 'Success'], ['f', 'm2', 'Success'], ['m1', 'j', 'Success'], ['m2', 'j', 'Success']],
    );
    const result = await runner.run(c, createRuleMsg({ metadata: { k: 'v' } }), context(sandbox));
    expect(result.msg.metadata).toEqual({ k: 'v', one: '1', two: '2' });
  });

  it('goes along Failure naming the branches that came along Failure', async () => {
    const c = chain(
      'fail',
      [fork, js('ok', 'jsTransform', 'return {msg};'), js('bad', 'jsTransform', "throw new Error('nope');"), join(), { id: 'failed', type: 'end' }],
      [['f', 'ok', 'Success'], ['f', 'bad', 'Success'], ['ok', 'j', 'Success'], ['bad', 'j', 'Failure'], ['j', 'failed', 'Failure']],
    );
    const result = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox));
    expect(result.ends.map((e) => e.nodeId)).toEqual(['failed']);
    expect(result.msg.metadata.error).toBe('NodeId=bad,Err=Error: nope (line 1)');
    // Parallel branches are listed in arrival order, which varies.
    expect((data(result.msg) as Item[]).map((i) => [i.nodeId, i.err]).sort()).toEqual([['bad', 'Error: nope (line 1)'], ['ok', '']]);
  });

  it('merges the branches that reached it when another ended elsewhere (inclusive join)', async () => {
    const c = chain(
      'inclusive',
      [fork, js('pass', 'jsFilter', 'return true;'), js('stop', 'jsFilter', 'return false;'), join()],
      [['f', 'pass', 'Success'], ['f', 'stop', 'Success'], ['pass', 'j', 'True'], ['stop', 'j', 'True']],
    );
    const result = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox));
    expect(result.ends.map((e) => [e.nodeId, e.relation])).toEqual([['stop', 'False'], ['j', 'Success']]);
    expect((data(result.msg) as Item[]).map((i) => i.nodeId)).toEqual(['pass']);
  });

  it('waits for its own branches inside another fork, and the outer join for the inner join', async () => {
    const c = chain(
      'nested',
      [fork, { id: 'g', type: 'fork' }, js('g1', 'jsTransform', set('g1', 'x')), js('g2', 'jsTransform', set('g2', 'x')), join({}, 'jg'), js('c', 'jsTransform', set('c', 'x')), join({ mergeToMap: true })],
      [['f', 'g', 'Success'], ['f', 'c', 'Success'], ['g', 'g1', 'Success'], ['g', 'g2', 'Success'], ['g1', 'jg', 'Success'], ['g2', 'jg', 'Success'], ['jg', 'j', 'Success'], ['c', 'j', 'Success']],
    );
    const result = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox));
    expect([timesRun(result, 'jg'), timesRun(result, 'j')]).toEqual([1, 1]);
    expect(result.ends.map((e) => e.nodeId)).toEqual(['j']);
    expect(Object.keys(data(result.msg) as object).sort()).toEqual(['c', 'jg']);
  });

  it('merges each message alone when its branches have no common ancestor', async () => {
    const c = chain('roots', [js('a', 'jsTransform', 'return {msg};'), js('b', 'jsTransform', 'return {msg};'), join()], [['a', 'j', 'Success'], ['b', 'j', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { x: 1 } }), context(sandbox));
    expect(result.ends.map((e) => [e.nodeId, e.relation])).toEqual([['j', 'Success']]);
    expect((data(result.msg) as Item[]).map((i) => [i.nodeId, JSON.parse(i.msg.data)])).toEqual([['a', { x: 1 }]]);
  });

  describe('timeout', () => {
    const slow = (failureEdge: boolean): ParsedChain =>
      chain(
        'slow',
        [fork, js('fast', 'jsTransform', 'return {msg};'), { id: 'wait', type: 'delay', configuration: { delayMs: 1600 } }, join({ timeout: 1 }), { id: 'late', type: 'end' }],
        [['f', 'fast', 'Success'], ['f', 'wait', 'Success'], ['fast', 'j', 'Success'], ['wait', 'j', 'Success'], ...(failureEdge ? [['j', 'late', 'Failure'] as C] : [])],
      );

    it('goes along Failure when a branch is still running at the timeout, and drops it when it arrives', async () => {
      logLines.length = 0;
      const result = await runner.run(slow(true), createRuleMsg({ data: {} }), context(sandbox));
      expect(result.ends.map((e) => e.nodeId)).toEqual(['late']);
      expect(result.msg.metadata.error).toBe('timed out after 1 s waiting for the parallel branches (1 arrived)');
      expect(timesRun(result, 'j')).toBe(1);
      // The run still waited for the slow branch, whose message was dropped at the join.
      expect(timesRun(result, 'wait')).toBe(1);
      expect(logLines.filter((l) => l.msg === 'a branch reached a join after its timeout; its message is dropped')).toEqual([expect.objectContaining({ nodeId: 'j', from: 'wait' })]);
    });

    it('waits for a timeout too long for a timer instead of timing out at once', async () => {
      const c = chain(
        'long',
        [fork, { id: 'wait', type: 'delay', configuration: { delayMs: 50 } }, js('fast', 'jsTransform', 'return {msg};'), join({ timeout: 3_000_000 })],
        [['f', 'fast', 'Success'], ['f', 'wait', 'Success'], ['fast', 'j', 'Success'], ['wait', 'j', 'Success']],
      );
      const result = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox));
      expect(result.ends.map((e) => [e.nodeId, e.relation])).toEqual([['j', 'Success']]);
    });

    it('fails the run at the timeout without a Failure connection', async () => {
      const err = await runError(slow(false), createRuleMsg({ data: {} }), context(sandbox));
      expect(err.message).toBe('chain "slow", node "j" (join): timed out after 1 s waiting for the parallel branches (1 arrived)');
    });
  });

  it('checks its configuration', () => {
    expect(problemsOf(join({ timeout: 3, mergeToMap: true }))).toEqual([]);
    expect(problemsOf(join({ timeout: 'soon' })).join('\n')).toMatch(/timeout/);
    expect(problemsOf(join({ branches: 2 })).join('\n')).toMatch(/branches/);
  });
});
