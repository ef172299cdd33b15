import Type from 'typebox';
import { compileExpr, evalExpr, stableJson } from '../chain/expr.js';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/**
 * Replaces the data with an expression's value (RuleGo's `exprTransform`, the expression subset
 * of `chain/expr.ts`): `expr` when it is set, else `mapping` (field -> expression) builds an
 * object (`{}` without either). A string becomes the data as it is, anything else JSON with
 * sorted keys (as RuleGo's Go maps); an evaluation error goes along Failure.
 */
export const exprTransform = defineNodeType({
  type: 'exprTransform',
  description: 'replaces the data with an expression, or an object of expressions (mapping)',
  configuration: Type.Object({
    expr: Type.Optional(Type.String({ description: 'the new data, e.g. upper(msg.name); takes priority over mapping' })),
    mapping: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'field -> expression, e.g. {"alarm": "msg.temperature > 50"}' })),
  }, { additionalProperties: false }),
  validate(config) {
    const problems: string[] = [];
    const check = (path: string, src: string) => {
      try {
        compileExpr(src);
      } catch (err) {
        problems.push(`${path}: ${(err as Error).message}`);
      }
    };
    if (config.expr?.trim()) check('expr', config.expr);
    else for (const [field, src] of Object.entries(config.mapping ?? {})) check(`mapping.${field}`, src);
    return problems;
  },
  async execute(msg, config) {
    const env = exprEnv(msg);
    let value: unknown;
    if (config.expr?.trim()) value = evalExpr(config.expr, env);
    else {
      const out = Object.create(null) as Record<string, unknown>;
      for (const [field, src] of Object.entries(config.mapping ?? {})) out[field] = evalExpr(src, env);
      value = out;
    }
    const data = typeof value === 'string' ? value : value === null ? '' : stableJson(value);
    return { msg: { ...msg, data }, relation: 'Success' };
  },
});
