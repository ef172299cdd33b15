import Type from 'typebox';
import { compileExpr } from '../expr.js';
import { defineNodeSpec } from './types.js';

/** More cases than this is a table, not a switch (and each costs an evaluation per message). */
const MAX_CASES = 100;

const Case = Type.Object(
  {
    case: Type.String({ description: 'a boolean expression over msg, metadata, type, id, data, dataType (msg.temperature > 50)' }),
    then: Type.String({ minLength: 1, maxLength: 100, description: 'the relation (connection type) to follow when it is true' }),
  },
  { additionalProperties: false },
);

/** The `switch` node as a definition holds it; what it does is the engine's `nodes/switch.ts`. */
export const exprSwitchSpec = defineNodeSpec({
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
});
