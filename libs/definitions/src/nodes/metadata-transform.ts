import Type from 'typebox';
import { compileExpr } from '../expr.js';
import { defineNodeSpec } from './types.js';

/** More fields than this is not a metadata mapping (each is an evaluation per message). */
const MAX_FIELDS = 100;

/** The `metadataTransform` node as a definition holds it; what it does is the engine's `nodes/metadata-transform.ts`. */
export const metadataTransformSpec = defineNodeSpec({
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
});
