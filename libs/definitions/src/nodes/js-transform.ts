import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `jsTransform` node as a definition holds it; what it does is the engine's `nodes/js-transform.ts`. */
export const jsTransformSpec = defineNodeSpec({
  type: 'jsTransform',
  description: 'rewrites the message with a script',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }, { additionalProperties: false }),
});
