import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `groupFilter` node as a definition holds it; what it does is the engine's `nodes/group-filter.ts`. */
export const groupFilterSpec = defineNodeSpec({
  type: 'groupFilter',
  description: 'routes True when any (or, with allMatches, every) listed filter node says True',
  configuration: Type.Object({
    allMatches: Type.Optional(Type.Boolean({ description: 'every node must say True (default: any)' })),
    nodeIds: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: 'filter node ids: a comma-separated string or a list' })),
    timeout: Type.Optional(Type.Integer({ description: 'seconds; default 30' })),
  }, { additionalProperties: false }),
});
