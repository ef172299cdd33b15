import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `jsFilter` node as a definition holds it; what it does is the engine's `nodes/js-filter.ts`. */
export const jsFilterSpec = defineNodeSpec({
  type: 'jsFilter',
  description: 'routes along True or False by the result of a script',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }, { additionalProperties: false }),
});
