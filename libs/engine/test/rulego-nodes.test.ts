import { describe, expect, it } from 'vitest';
import { createRuleMsg, type RuleMsg } from '../src/index.js';
import { chain, context, problemsOf, runner } from './chain-helpers.js';

/**
 * fieldFilter, metadataTransform and comment: the cases of RuleGo's field_filter_node_test.go and
 * metadata_transform_node_test.go (components/filter, components/transform).
 */

const end = (id: string) => ({ id, type: 'end' });

async function runOne(type: string, configuration: Record<string, unknown>, msg: RuleMsg) {
  const c = chain('one', [{ id: 'n', type, configuration }, end('e'), end('failed')], [['n', 'e', 'never'], ['n', 'failed', 'Failure']]);
  const result = await runner.run(c, msg, context());
  return { relation: result.trace[0]?.relations[0], msg: result.ends[0]!.msg };
}

describe('fieldFilter (RuleGo cases)', () => {
  const md = { productType: 'A001', name: 'A001' };
  const relation = async (configuration: Record<string, unknown>, data: string, metadata: Record<string, string> = md) =>
    (await runOne('fieldFilter', configuration, createRuleMsg({ type: 'ACTIVITY_EVENT', data, metadata }))).relation;

  it('checkAllKeys: every named metadata and data field must be there', async () => {
    expect(await relation({ checkAllKeys: true, dataNames: 'temperature', metadataNames: 'productType,name' }, '{"temperature":40}')).toBe('True');
    expect(await relation({ checkAllKeys: true, dataNames: 'temperature', metadataNames: 'productType,name,location' }, '{"temperature":40}')).toBe('False');
    expect(await relation({ checkAllKeys: true, dataNames: 'temperature' }, '{"temperature2":40}')).toBe('False');
  });

  it('otherwise one field of either is enough; blanks between commas are dropped', async () => {
    expect(await relation({ checkAllKeys: false, dataNames: 'temperature', metadataNames: 'productType,name,location' }, '{"temperature2":40}')).toBe('True');
    expect(await relation({ dataNames: ' temperature , ,temp' }, '{"temp":1}', {})).toBe('True');
    expect(await relation({ checkAllKeys: false, dataNames: 'temperature', metadataNames: 'productType,name,location' }, '{"temperature2":40}', {})).toBe('False');
  });

  it('text has no fields (False); JSON that is not an object goes along Failure', async () => {
    // RuleGo's test sends "aa" declared as JSON and gets Failure; Agentry tells the data type from
    // the data, so "aa" is text, which has no fields.
    expect(await relation({ dataNames: 'temperature' }, 'aa', {})).toBe('False');
    expect(await relation({ dataNames: 'temperature' }, '[1,2]', {})).toBe('Failure');
  });
});

describe('metadataTransform (RuleGo cases)', () => {
  const msg = () =>
    createRuleMsg({ id: '226a05f1-9464-43b6-881e-b1629f1b030d', type: 'ACTIVITY_EVENT', data: '{"name":"aa","temperature":60,"humidity":30}', metadata: { productType: 'test' } });
  const mapping = { id: 'id', ts: 'ts', dataType: 'dataType', type: 'type', name: 'upper(msg.name)', tmp: 'msg.temperature', alarm: 'msg.temperature>50' };

  it('sets each field to its expression, keeping the rest of the metadata and the data', async () => {
    const out = await runOne('metadataTransform', { mapping: { ...mapping, test01: "'test01'", temperature2: 'msg.temperature2' } }, msg());
    expect(out.relation).toBe('Success');
    expect(out.msg.metadata).toEqual({
      productType: 'test',
      id: '226a05f1-9464-43b6-881e-b1629f1b030d',
      ts: '',
      dataType: 'JSON',
      type: 'ACTIVITY_EVENT',
      name: 'AA',
      tmp: '60',
      alarm: 'true',
      test01: 'test01',
      temperature2: '',
    });
    expect(out.msg.data).toBe(msg().data);
  });

  it('isNew: the metadata becomes only the mapping; an evaluation error goes along Failure', async () => {
    const out = await runOne('metadataTransform', { isNew: true, mapping }, msg());
    expect(out.msg.metadata.name).toBe('AA');
    expect(out.msg.metadata.productType).toBeUndefined();
    expect((await runOne('metadataTransform', { isNew: true, mapping: { id: 'xx+1' } }, msg())).relation).toBe('Failure');
  });

  it('refuses at save a mapping that does not compile, or none', () => {
    expect(problemsOf({ id: 'm', type: 'metadataTransform', configuration: { mapping: { a: 'msg.a >' } } }).join('\n')).toMatch(/mapping\.a: /);
    expect(problemsOf({ id: 'm', type: 'metadataTransform', configuration: {} }).join('\n')).toMatch(/mapping/);
    expect(problemsOf({ id: 'm', type: 'metadataTransform', configuration: { mapping: { a: 'msg.a' } } })).toEqual([]);
  });
});

describe('comment', () => {
  it('passes the message on unchanged along Success, and takes no configuration', async () => {
    const m = createRuleMsg({ data: '{"a":1}', metadata: { k: 'v' } });
    const out = await runOne('comment', {}, m);
    expect(out).toEqual({ relation: 'Success', msg: m });
    expect(problemsOf({ id: 'c', type: 'comment' })).toEqual([]);
  });
});
