import { describe, expect, it } from 'vitest';
import { createRuleMsg, type RuleMsg } from '../src/index.js';
import { MAX_EXPR_LENGTH, evalExpr } from '@agentry/definitions';
import { exprEnv } from '../src/chain/message.js';
import { chain, context, problemsOf, runner } from './chain-helpers.js';

/** exprFilter: RuleGo's expr_filter_node_test, and what a hostile expression cannot do. */

async function route(expr: string, msg: RuleMsg): Promise<string> {
  const c = chain('x', [{ id: 'x', type: 'exprFilter', configuration: { expr } }, { id: 'failed', type: 'end' }], [['x', 'failed', 'Failure']]);
  const result = await runner.run(c, msg, context());
  const end = result.ends[0];
  return end?.nodeId === 'failed' ? 'Failure' : (end?.relation ?? '');
}

const meta = { productType: 'test' };
const msg1 = () => createRuleMsg({ type: 'ACTIVITY_EVENT', data: 'AA', metadata: meta }); // DataType TEXT
const msg2 = () => createRuleMsg({ type: 'ACTIVITY_EVENT', data: '{"name":"aa","temperature":60,"humidity":30}', metadata: meta });
const msg3 = () => createRuleMsg({ type: 'ACTIVITY_EVENT', data: '{"name":"bb","temperature":40}', metadata: meta });

describe('exprFilter (RuleGo cases)', () => {
  it('routes True, False or Failure as RuleGo does', async () => {
    const cases: Array<[string, () => RuleMsg, string]> = [
      ['msg.temperature > 50', msg1, 'Failure'],
      ['msg.temperature > 50', msg2, 'True'],
      ['msg.temperature > 50 && msg.humidity > 20', msg2, 'True'],
      ["upper(msg.name)=='AA'", msg2, 'True'],
      ["upper(msg.name)=='AA'", msg3, 'False'],
      ['temperature==nil?true:false', msg1, 'True'],
      ["upper(msg)=='AA'", msg1, 'True'],
      ["upper(msg[:1])=='A'", msg1, 'True'],
    ];
    for (const [expr, msg, relation] of cases) expect(await route(expr, msg()), expr).toBe(relation);
  });

  it('is False for any result but true', async () => {
    for (const expr of ['1', "'true'", 'nil', 'msg.name']) expect(await route(expr, msg2()), expr).toBe('False');
  });

  it('sees id, data, type, dataType and metadata', async () => {
    const m = msg2();
    expect(await route(`id == '${m.id}' && type == 'ACTIVITY_EVENT' && dataType == 'JSON' && metadata.productType == 'test' && data contains 'aa'`, m)).toBe('True');
    expect(await route("dataType == 'TEXT' and not (msg startsWith 'B') and 'A' in split(msg, '')", msg1())).toBe('True');
  });

  it('refuses an empty expression, unsupported syntax and node references when the chain is saved', () => {
    const problems = (expr: string) => problemsOf({ id: 'x', type: 'exprFilter', configuration: { expr } }).join('\n');
    expect(problems('msg.temperature > 50')).toBe('');
    expect(problems('')).toMatch(/expr: the expression is empty/);
    expect(problems('msg.name matches "a+"')).toMatch(/"matches" is not supported/);
    expect(problems('all(msg.items, {.x > 1})')).toMatch(/"all" is not supported/);
    expect(problems('filter(msg.items, # > 1)')).toMatch(/unexpected "#"/);
    expect(problems('${node1.msg.temperature} > 50')).toMatch(/node references are not supported/);
    expect(problems('msg.temperature >')).toMatch(/unexpected the end of the expression/);
    expect(problems('eval("1")')).toMatch(/unknown function eval\(\)/);
    expect(problemsOf({ id: 'x', type: 'exprFilter' }).join('\n')).toMatch(/expr/);
  });
});

describe('expressions are hostile', () => {
  const env = exprEnv(createRuleMsg({ data: '{"a":{"b":1},"__proto__":{"polluted":true},"list":[1,2]}' }));

  it('reach own fields of the message only: no prototype, constructor or host objects', () => {
    for (const expr of ['msg.constructor', 'msg.a.toString', "msg['__proto__'].polluted", 'msg.list.length', 'globalThis', 'process', 'this', 'msg.a.hasOwnProperty']) {
      const out = (() => {
        try {
          return evalExpr(expr, env);
        } catch (err) {
          return (err as Error).name;
        }
      })();
      expect([null, 'ExprError', true], expr).toContain(out);
    }
    // The only "__proto__" is the message's own key; nothing was polluted.
    expect(evalExpr("msg['__proto__'].polluted", env)).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(() => evalExpr('msg.constructor("x")', env)).toThrow(/unexpected "\("/);
    expect(() => evalExpr('constructor("return process")()', env)).toThrow(/unknown function constructor\(\)/);
  });

  it('are bounded in length, nesting and the strings they build', () => {
    expect(() => evalExpr('1+'.repeat(MAX_EXPR_LENGTH) + '1', env)).toThrow(/longer than 4096 characters/);
    expect(() => evalExpr('('.repeat(200) + '1' + ')'.repeat(200), env)).toThrow(/nests deeper than 64 levels/);
    expect(() => evalExpr('!'.repeat(200) + 'true', env)).toThrow(/nests deeper than 64 levels/);
    const big = exprEnv(createRuleMsg({ data: { s: 'x'.repeat(600_000) } }));
    expect(() => evalExpr('msg.s + msg.s', big)).toThrow(/a string longer than/);
    expect(() => evalExpr("replace(msg.s, 'x', 'xx')", big)).toThrow(/a string longer than/);
  });

  it('are strictly typed, as expr', () => {
    expect(() => evalExpr("msg.missing + 'xx'", env)).toThrow('invalid operation: nil + string');
    expect(() => evalExpr('msg.a > 1', env)).toThrow('invalid operation: map > number');
    expect(() => evalExpr('1 && true', env)).toThrow('&& needs a bool, not number');
    expect(() => evalExpr('msg.list[5]', env)).toThrow('index out of range: 5 (length 2)');
    expect(() => evalExpr('1 / 0', env)).toThrow(/not a finite number/);
    expect(evalExpr('msg.missing ?? 7', env)).toBe(7);
    expect(evalExpr('msg.missing?.x', env)).toBe(null);
    expect(evalExpr('msg.list[-1] + len(msg.list) * 2 ** 3 % 5', env)).toBe(2 + ((2 * 8) % 5));
    expect(evalExpr('2 in msg.list && "b" in msg.a && 3 not in msg.list', env)).toBe(true);
  });
});
