import { evalExpr, stableJson, metadataTransformSpec } from '@agentry/definitions';
import { exprEnv } from '../chain/message.js';
import { defineNodeType } from './types.js';

/**
 * RuleGo's `metadataTransform`: each field of `mapping` is set in the metadata to its
 * expression's value (the expression subset of `@agentry/definitions` `expr.ts`): a string as it is, nil as "",
 * anything else as JSON. `isNew` replaces the whole metadata with the mapping's fields. The data
 * is unchanged; an evaluation error goes along Failure with the message as it came.
 */
export const metadataTransform = defineNodeType({
  ...metadataTransformSpec,
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
