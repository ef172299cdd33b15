import Type from 'typebox';
import { compileExpr } from '../expr.js';
import { defineNodeSpec } from './types.js';

/** The `exprFilter` node as a definition holds it; what it does is the engine's `nodes/expr-filter.ts`. */
export const exprFilterSpec = defineNodeSpec({
  type: 'exprFilter',
  description: 'routes True or False by an expression (msg.temperature > 50)',
  configuration: Type.Object({ expr: Type.String({ description: 'a boolean expression over msg, metadata, type, id, data, dataType' }) }, { additionalProperties: false }),
  validate(config) {
    try {
      compileExpr(config.expr);
      return [];
    } catch (err) {
      return [`expr: ${(err as Error).message}`];
    }
  },
});
