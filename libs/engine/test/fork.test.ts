import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Type from 'typebox';
import { ChainRunner, ScriptSandbox, createRuleMsg, defineNodeType, nodeTypes } from '../src/index.js';
import { chain, context, customChain, js, problemsOf, runner, type C, type N } from './chain-helpers.js';

/** fork: its Success branches run at the same time; other nodes' branches one after the other. */

let sandbox: ScriptSandbox;
beforeAll(() => {
  sandbox = new ScriptSandbox({ workers: 2 });
});
afterAll(() => sandbox.close());

/**
 * A node that shows overlap without timing: it waits until `want` probes are running at once
 * (then all of them go on) or gives up after `patienceMs`, and records the most it saw.
 */
function probes(want: number, patienceMs = 150) {
  const seen = { active: 0, max: 0, waiting: [] as Array<() => void> };
  const probe = defineNodeType({
    type: 'probe',
    description: 'waits for company',
    configuration: Type.Object({}),
    async execute(msg, _config, ctx) {
      seen.active++;
      seen.max = Math.max(seen.max, seen.active);
      if (seen.active >= want) for (const go of seen.waiting.splice(0)) go();
      else await new Promise<void>((resolve) => { seen.waiting.push(resolve); setTimeout(resolve, patienceMs); });
      seen.active--;
      return { msg: { ...msg, data: ctx.node.id }, relation: 'Success' };
    },
  });
  return { seen, runner: new ChainRunner({ executors: { ...nodeTypes, probe } }) };
}

const probe = (id: string): N => ({ id, type: 'probe' });

describe('fork', () => {
  it('passes the message on along Success', async () => {
    const c = chain('f', [{ id: 'f', type: 'fork' }, { id: 'e', type: 'end' }], [['f', 'e', 'Success']]);
    const input = createRuleMsg({ data: '{"a":1}', metadata: { k: 'v' } });
    const result = await runner.run(c, input, context());
    expect(result.ends).toEqual([{ nodeId: 'e', relation: undefined, msg: input }]);
    expect(result.trace.map((t) => [t.nodeId, t.relations])).toEqual([['f', ['Success']], ['e', []]]);
  });

  it('runs its branches at the same time', async () => {
    const { seen, runner: r } = probes(3, 5000);
    const c = customChain('par', [{ id: 'f', type: 'fork' }, probe('p1'), probe('p2'), probe('p3')], [['f', 'p1', 'Success'], ['f', 'p2', 'Success'], ['f', 'p3', 'Success']]);
    const result = await r.run(c, createRuleMsg(), context());
    expect(seen.max).toBe(3);
    // Ends are listed in branch order whatever order the branches finish in.
    expect(result.ends.map((e) => [e.nodeId, e.msg.data])).toEqual([['p1', 'p1'], ['p2', 'p2'], ['p3', 'p3']]);
  });

  it('gives each branch its own copy of the message', async () => {
    const c = chain(
      'copies',
      [{ id: 'f', type: 'fork' }, js('m1', 'jsTransform', "metadata.who = 'one'; return {metadata};"), js('m2', 'jsTransform', 'return {metadata};')],
      [['f', 'm1', 'Success'], ['f', 'm2', 'Success']],
    );
    const result = await runner.run(c, createRuleMsg({ metadata: { k: 'v' } }), context(sandbox));
    expect(result.ends.map((e) => e.msg.metadata)).toEqual([{ k: 'v', who: 'one' }, { k: 'v' }]);
  });

  it('leaves the branches of other nodes one after the other, depth first', async () => {
    const { seen, runner: r } = probes(2);
    const c = customChain('seq', [js('s', 'jsSwitch', "return ['a', 'b'];"), probe('p1'), probe('p2')], [['s', 'p1', 'a'], ['s', 'p2', 'b']]);
    await r.run(c, createRuleMsg({ data: {} }), context(sandbox));
    expect(seen.max).toBe(1);
  });

  it('fails the run after every branch has ended when one fails without a Failure connection', async () => {
    const c = chain(
      'fails',
      [{ id: 'f', type: 'fork' }, js('bad', 'jsTransform', "throw new Error('boom');"), js('slow', 'jsTransform', "metadata.done = 'yes'; return {metadata};"), { id: 'e', type: 'end' }],
      [['f', 'bad', 'Success'], ['f', 'slow', 'Success'], ['slow', 'e', 'Success']] as C[],
    );
    const err = await runner.run(c, createRuleMsg({ data: {} }), context(sandbox)).catch((e: unknown) => e as Error);
    expect((err as Error).message).toMatch(/chain "fails", node "bad" \(jsTransform\): Error: boom/);
    expect((err as { trace: Array<{ nodeId: string }> }).trace.map((t) => t.nodeId).sort()).toEqual(['bad', 'e', 'f', 'slow']);
  });

  it('takes no configuration', () => {
    expect(problemsOf({ id: 'f', type: 'fork' })).toEqual([]);
    expect(problemsOf({ id: 'f', type: 'fork', configuration: { parallel: 2 } }).join('\n')).toMatch(/parallel/);
  });
});
