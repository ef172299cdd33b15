import { evalExpr, stableJson, exprTransformSpec } from '@agentry/definitions';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/**
 * Replaces the data with an expression's value (RuleGo's `exprTransform`, the expression subset
 * of `@agentry/definitions` `expr.ts`): `expr` when it is set, else `mapping` (field -> expression) builds an
 * object (`{}` without either). A string becomes the data as it is, anything else JSON with
 * sorted keys (as RuleGo's Go maps); an evaluation error goes along Failure.
 */
export const exprTransform = defineNodeType({
  ...exprTransformSpec,
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
