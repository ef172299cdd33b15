import Type from 'typebox';
import { compileExpr, evalExpr, stableJson } from '../chain/expr.js';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/** More fields than this is not a metadata mapping (each is an evaluation per message). */
const MAX_FIELDS = 100;

/**
 * RuleGo's `metadataTransform`: each field of `mapping` is set in the metadata to its
 * expression's value (the expression subset of `chain/expr.ts`): a string as it is, nil as "",
 * anything else as JSON. `isNew` replaces the whole metadata with the mapping's fields. The data
 * is unchanged; an evaluation error goes along Failure with the message as it came.
 */
export const metadataTransform = defineNodeType({
  type: 'metadataTransform',
  description: 'sets metadata fields to expressions (mapping); isNew replaces the metadata',
  configuration: Type.Object(
    {
      mapping: Type.Record(Type.String(), Type.String(), { maxProperties: MAX_FIELDS, description: 'metadata field -> expression, e.g. {"temperature": "msg.temperature"}' }),
      isNew: Type.Optional(Type.Boolean({ description: 'true: the metadata becomes only these fields; false: they are set, the rest kept' })),
    },
    { additionalProperties: false },
  ),
  validate(config) {
    const problems: string[] = [];
    for (const [field, src] of Object.entries(config.mapping)) {
      try {
        compileExpr(src);
      } catch (err) {
        problems.push(`mapping.${field}: ${(err as Error).message}`);
      }
    }
    return problems;
  },
  async execute(msg, config) {
    const env = exprEnv(msg);
    const out: Record<string, string> = {};
    for (const [field, src] of Object.entries(config.mapping)) {
      const value = evalExpr(src, env);
      out[field] = typeof value === 'string' ? value : value === null ? '' : stableJson(value);
    }
    const metadata = config.isNew ? out : { ...msg.metadata, ...out };
    return { msg: { ...msg, metadata }, relation: 'Success' };
  },
});
