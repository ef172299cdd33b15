import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `end` node as a definition holds it; what it does is the engine's `nodes/end.ts`. */
export const endSpec = defineNodeSpec({
  type: 'end',
  description: 'ends the chain',
  configuration: Type.Object({}, { additionalProperties: false }),
});
