import { describe, expect, it } from 'vitest';
import { createRuleMsg } from '../src/index.js';
import { chain, context, problemsOf, runner } from './chain-helpers.js';

/** msgTypeSwitch: RuleGo's msg_type_switch_node_test and chain_msg_type_switch.json. */

const end = (id: string) => ({ id, type: 'end' });

describe('msgTypeSwitch', () => {
  const c = chain(
    'mts',
    [{ id: 's', type: 'msgTypeSwitch' }, end('e1'), end('e2'), end('other')],
    [['s', 'e1', 'ACTIVITY_EVENT1'], ['s', 'e2', 'ACTIVITY_EVENT2'], ['s', 'other', 'Default']],
  );

  it('routes along the relation named by the message type', async () => {
    for (const [type, nodeId] of [['ACTIVITY_EVENT1', 'e1'], ['ACTIVITY_EVENT2', 'e2']]) {
      const result = await runner.run(c, createRuleMsg({ type, data: '{"temperature":41}' }), context());
      expect(result.ends.map((e) => e.nodeId)).toEqual([nodeId]);
      expect(result.trace[0]?.relations).toEqual([type]);
    }
  });

  it('routes a type no connection names along Default; the match is case-sensitive', async () => {
    for (const type of ['ACTIVITY_EVENT3', 'activity_event1']) {
      const result = await runner.run(c, createRuleMsg({ type }), context());
      expect(result.ends.map((e) => [e.nodeId, e.msg.type])).toEqual([['other', type]]);
      expect(result.trace[0]?.relations).toEqual(['Default']);
    }
  });

  it('ends the branch on Default when there is no Default connection', async () => {
    const bare = chain('bare', [{ id: 's', type: 'msgTypeSwitch' }, end('e1')], [['s', 'e1', 'A']]);
    const result = await runner.run(bare, createRuleMsg({ type: 'B' }), context());
    expect(result.ends).toEqual([{ nodeId: 's', relation: 'Default', msg: expect.objectContaining({ type: 'B' }) }]);
  });

  it('takes no configuration', () => {
    expect(problemsOf({ id: 's', type: 'msgTypeSwitch' })).toEqual([]);
    expect(problemsOf({ id: 's', type: 'msgTypeSwitch', configuration: { default: 'x' } }).join('\n')).toMatch(/default/);
  });
});
