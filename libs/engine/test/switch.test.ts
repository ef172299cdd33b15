import { describe, expect, it } from 'vitest';
import { createRuleMsg } from '../src/index.js';
import { chain, context, problemsOf, runner } from './chain-helpers.js';

/** switch: RuleGo's switch_node_test (components/common) and what a bad case cannot do. */

const end = (id: string) => ({ id, type: 'end' });

async function relationOf(cases: Array<{ case: string; then: string }>, data: string, metadata: Record<string, string> = {}): Promise<string | undefined> {
  const c = chain('sw', [{ id: 's', type: 'switch', configuration: { cases } }, end('e')], [['s', 'e', 'never']]);
  const result = await runner.run(c, createRuleMsg({ type: 'ACTIVITY_EVENT', data, metadata }), context());
  return result.trace[0]?.relations[0];
}

describe('switch (RuleGo cases)', () => {
  const cases = [
    { case: 'msg.temperature > 50', then: 'case1' },
    { case: 'metadata.productType == "test"', then: 'case2' },
    { case: 'msg.temperature > 30 && msg.humidity > 20', then: 'case3' },
    { case: 'msg.temperature2!=nil &&msg.temperature2 > 50', then: 'case4' },
  ];

  it('follows the first case that is true, in order, else Default', async () => {
    expect(await relationOf(cases, '{"name":"aa","temperature":60,"humidity":30}', { productType: 'test2' })).toBe('case1');
    expect(await relationOf(cases, '{"name":"aa","temperature":20,"humidity":30}', { productType: 'test' })).toBe('case2');
    expect(await relationOf(cases, '{"name":"aa","temperature":40,"humidity":30}', { productType: 'test2' })).toBe('case3');
    expect(await relationOf(cases, '{"name":"aa","temperature":10,"humidity":30}', { productType: 'test2' })).toBe('Default');
  });

  it('skips a case whose evaluation fails (nil > 50, a text message), as RuleGo does, instead of failing', async () => {
    expect(await relationOf([{ case: 'msg.temperature2 > 50', then: 'case4' }], '{"name":"aa","temperature":60}')).toBe('Default');
    expect(await relationOf([{ case: 'msg.temperature2 > 50', then: 'a' }, { case: 'msg.name == "aa"', then: 'b' }], '{"name":"aa"}')).toBe('b');
    expect(await relationOf([{ case: 'msg.x > 1', then: 'a' }, { case: 'data == "plain"', then: 'text' }], 'plain')).toBe('text');
    // A result that is not true does not match: "true" the string, 1, nil.
    expect(await relationOf([{ case: '"true"', then: 'a' }, { case: '1', then: 'b' }, { case: 'msg.none', then: 'c' }], '{}')).toBe('Default');
  });

  it('routes the message unchanged along the relation, to the connections that name it', async () => {
    const c = chain(
      'sw2',
      [{ id: 's', type: 'switch', configuration: { cases: [{ case: 'msg.t >= 20 && msg.t <= 50', then: 'Case1' }, { case: 'msg.t > 50', then: 'Case2' }] } }, end('one'), end('two'), end('other')],
      [['s', 'one', 'Case1'], ['s', 'two', 'Case2'], ['s', 'other', 'Default']],
    );
    for (const [t, nodeId] of [[30, 'one'], [60, 'two'], [5, 'other']] as const) {
      const result = await runner.run(c, createRuleMsg({ data: JSON.stringify({ t }) }), context());
      expect(result.ends.map((e) => [e.nodeId, e.msg.data])).toEqual([[nodeId, JSON.stringify({ t })]]);
    }
  });

  it('refuses at save a case that does not compile, an empty list, a case without then, and an unsupported construct', () => {
    const problems = (configuration: unknown) => problemsOf({ id: 's', type: 'switch', configuration: configuration as Record<string, unknown> }).join('\n');
    expect(problems({ cases: [{ case: 'msg.a >', then: 'x' }] })).toMatch(/cases\[0\]\.case: /);
    expect(problems({ cases: [{ case: 'msg.a matches "(a+)+$"', then: 'x' }] })).toMatch(/cases\[0\]\.case: .*matches/);
    expect(problems({ cases: [{ case: '${msg.a} > 1', then: 'x' }] })).toMatch(/cases\[0\]\.case: .*not supported/);
    expect(problems({ cases: [] })).toMatch(/cases/);
    expect(problems({})).toMatch(/cases/);
    expect(problems({ cases: [{ case: 'true' }] })).toMatch(/then/);
    expect(problems({ cases: [{ case: 'x'.repeat(5000), then: 'x' }] })).toMatch(/longer than 4096/);
    expect(problems({ cases: Array.from({ length: 101 }, () => ({ case: 'true', then: 'x' })) })).toMatch(/cases/);
    expect(problems({ cases: [{ case: 'true', then: 'x' }] })).toBe('');
  });
});
