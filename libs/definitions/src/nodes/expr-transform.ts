import Type from 'typebox';
import { compileExpr } from '../expr.js';
import { defineNodeSpec } from './types.js';

/** The `exprTransform` node as a definition holds it; what it does is the engine's `nodes/expr-transform.ts`. */
export const exprTransformSpec = defineNodeSpec({
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
});
