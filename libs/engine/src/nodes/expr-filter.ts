import { evalExpr, exprFilterSpec } from '@agentry/definitions';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/**
 * Routes along `True` when the expression (RuleGo's expr language, the subset of `@agentry/definitions` `expr.ts`)
 * is `true`, `False` for anything else; an evaluation error (`msg.x` of a text message, `nil +
 * 1`) goes along Failure. It sees `id`, `data` (text), `msg` (parsed when JSON), `metadata`,
 * `type` and `dataType`; an unknown name is nil.
 */
export const exprFilter = defineNodeType({
  ...exprFilterSpec,
  async execute(msg, config) {
    return { msg, relation: evalExpr(config.expr, exprEnv(msg)) === true ? 'True' : 'False' };
  },
});
