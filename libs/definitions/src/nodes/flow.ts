import Type from 'typebox';
import { AUTHORITY } from '../authority/policy.js';
import { defineNodeSpec } from './types.js';

/** The `flow` node as a definition holds it; what it does is the engine's `nodes/flow.ts`. */
export const flowSpec = defineNodeSpec({
  type: 'flow',
  description: 'runs another rule chain',
  configuration: Type.Object({
    targetId: Type.String({ minLength: 1, description: 'id of the chain to run', ...AUTHORITY }),
    extend: Type.Optional(Type.Boolean({ description: 'continue with the last end as it is instead of merging the ends' })),
  }, { additionalProperties: false }),
});
