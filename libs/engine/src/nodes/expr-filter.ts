import Type from 'typebox';
import { compileExpr, evalExpr } from '../chain/expr.js';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/**
 * Routes along `True` when the expression (RuleGo's expr language, the subset of `chain/expr.ts`)
 * is `true`, `False` for anything else; an evaluation error (`msg.x` of a text message, `nil +
 * 1`) goes along Failure. It sees `id`, `data` (text), `msg` (parsed when JSON), `metadata`,
 * `type` and `dataType`; an unknown name is nil.
 */
export const exprFilter = defineNodeType({
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
  async execute(msg, config) {
    return { msg, relation: evalExpr(config.expr, exprEnv(msg)) === true ? 'True' : 'False' };
  },
});
