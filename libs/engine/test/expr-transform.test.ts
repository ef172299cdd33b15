import { describe, expect, it } from 'vitest';
import { createRuleMsg, type RuleMsg } from '../src/index.js';
import { chain, context, problemsOf, runner } from './chain-helpers.js';

/** exprTransform: RuleGo's expr_transform_node_test. */

async function transform(configuration: Record<string, unknown>, msg: RuleMsg) {
  const c = chain('t', [{ id: 't', type: 'exprTransform', configuration }, { id: 'failed', type: 'end' }], [['t', 'failed', 'Failure']]);
  const result = await runner.run(c, msg, context());
  return { relation: result.ends[0]?.nodeId === 'failed' ? 'Failure' : 'Success', msg: result.msg };
}

const msg = () =>
  createRuleMsg({ id: '226a05f1-9464-43b6-881e-b1629f1b030d', type: 'ACTIVITY_EVENT', data: '{"name":"aa","temperature":60,"humidity":30}', metadata: { productType: 'test' } });
const msg1 = () => createRuleMsg({ type: 'ACTIVITY_EVENT', data: 'aa', metadata: { productType: 'test' } });

describe('exprTransform (RuleGo cases)', () => {
  it('mapping builds an object, keys sorted as Go writes maps (ts aside: Agentry messages have none)', async () => {
    const out = await transform(
      { mapping: { id: 'id', dataType: 'dataType', type: 'type', name: 'upper(msg.name)', tmp: 'msg.temperature', alarm: 'msg.temperature>50', productType: 'metadata.productType' } },
      msg(),
    );
    expect(out.relation).toBe('Success');
    expect(out.msg.data).toBe('{"alarm":true,"dataType":"JSON","id":"226a05f1-9464-43b6-881e-b1629f1b030d","name":"AA","productType":"test","tmp":60,"type":"ACTIVITY_EVENT"}');
    expect(out.msg.metadata).toEqual({ productType: 'test' });
  });

  it('expr replaces the data, and takes priority over mapping', async () => {
    expect((await transform({ expr: 'upper(msg.name)' }, msg())).msg.data).toBe('AA');
    expect((await transform({ expr: 'upper(msg[:1])' }, msg1())).msg.data).toBe('A');
    expect((await transform({ expr: 'upper(msg[:1])', mapping: { name: 'upper(msg.name)' } }, msg1())).msg.data).toBe('A');
    expect((await transform({ expr: 'msg.temperature * 2' }, msg())).msg.data).toBe('120');
  });

  it('toJSON writes indented JSON with sorted keys', async () => {
    const out = await transform({ expr: "replace(toJSON(msg),'name','productName')" }, msg());
    expect(out.msg.data).toBe('{\n  "humidity": 30,\n  "productName": "aa",\n  "temperature": 60\n}');
  });

  it('goes along Failure on an evaluation error, keeping the data', async () => {
    for (const configuration of [{ expr: "msg.aa+'xx'" }, { mapping: { name: 'msg.aa+1' } }]) {
      const out = await transform(configuration, msg());
      expect(out.relation, JSON.stringify(configuration)).toBe('Failure');
      expect(out.msg.data).toBe(msg().data);
    }
  });

  it('gives {} without expr or mapping', async () => {
    expect((await transform({}, msg())).msg.data).toBe('{}');
  });

  it('checks every expression when the chain is saved; a trailing ; is accepted as in RuleGo', () => {
    expect(problemsOf({ id: 't', type: 'exprTransform', configuration: { expr: 'msg.aa;' } })).toEqual([]);
    expect(problemsOf({ id: 't', type: 'exprTransform', configuration: { mapping: { name: 'msg.aa;' } } })).toEqual([]);
    expect(problemsOf({ id: 't', type: 'exprTransform', configuration: { mapping: { ok: 'msg.a', bad: 'msg.a +' } } }).join('\n')).toMatch(/mapping\.bad: unexpected/);
    expect(problemsOf({ id: 't', type: 'exprTransform', configuration: { mapping: { n: 1 } } }).join('\n')).toMatch(/mapping/);
  });
});
