import Type from 'typebox';
import { compileExpr, evalExpr } from '../chain/expr.js';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/** RuleGo's relation when no case matches. */
const DEFAULT_RELATION = 'Default';
/** More cases than this is a table, not a switch (and each costs an evaluation per message). */
const MAX_CASES = 100;

const Case = Type.Object(
  {
    case: Type.String({ description: 'a boolean expression over msg, metadata, type, id, data, dataType (msg.temperature > 50)' }),
    then: Type.String({ minLength: 1, maxLength: 100, description: 'the relation (connection type) to follow when it is true' }),
  },
  { additionalProperties: false },
);

/**
 * RuleGo's `switch`: the cases are evaluated in order (RuleGo's expression language, the subset
 * of `chain/expr.ts`, bounded in length and depth, without loops or regular expressions) and the
 * message goes along the `then` of the first one that is `true`; when none is, along `Default`.
 * As in RuleGo, a case whose evaluation fails (`msg.x > 1` of a text message) is skipped, not a
 * Failure, and a result other than `true` does not match.
 */
export const exprSwitch = defineNodeType({
  type: 'switch',
  description: "routes along the first case's relation whose expression is true, else Default",
  configuration: Type.Object({ cases: Type.Array(Case, { minItems: 1, maxItems: MAX_CASES }) }, { additionalProperties: false }),
  validate(config) {
    const problems: string[] = [];
    config.cases.forEach((c, i) => {
      try {
        compileExpr(c.case);
      } catch (err) {
        problems.push(`cases[${i}].case: ${(err as Error).message}`);
      }
    });
    return problems;
  },
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
