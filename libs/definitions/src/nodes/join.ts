import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `join` node as a definition holds it; what it does is the engine's `nodes/join.ts`. */
export const joinSpec = defineNodeSpec({
  type: 'join',
  description: 'waits for parallel branches and merges their messages',
  configuration: Type.Object({
    timeout: Type.Optional(Type.Integer({ description: 'seconds to wait for every branch; default 30' })),
    mergeToMap: Type.Optional(Type.Boolean({ description: 'merge the branch data into one object instead of a list' })),
  }, { additionalProperties: false }),
});
