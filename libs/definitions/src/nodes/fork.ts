import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `fork` node as a definition holds it; what it does is the engine's `nodes/fork.ts`. */
export const forkSpec = defineNodeSpec({
  type: 'fork',
  description: 'runs every Success branch in parallel (merge them with join)',
  configuration: Type.Object({}, { additionalProperties: false }),
});
