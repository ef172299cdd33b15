import { evalExpr, exprSwitchSpec } from '@agentry/definitions';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/** RuleGo's relation when no case matches. */
const DEFAULT_RELATION = 'Default';

/**
 * RuleGo's `switch`: the cases are evaluated in order (RuleGo's expression language, the subset
 * of `@agentry/definitions` `expr.ts`, bounded in length and depth, without loops or regular expressions) and the
 * message goes along the `then` of the first one that is `true`; when none is, along `Default`.
 * As in RuleGo, a case whose evaluation fails (`msg.x > 1` of a text message) is skipped, not a
 * Failure, and a result other than `true` does not match.
 */
export const exprSwitch = defineNodeType({
  ...exprSwitchSpec,
  async execute(msg, config) {
    const env = exprEnv(msg);
    for (const c of config.cases) {
      let result: unknown;
      try {
        result = evalExpr(c.case, env);
      } catch {
        continue;
      }
      if (result === true) return { msg, relation: c.then };
    }
    return { msg, relation: DEFAULT_RELATION };
  },
});
