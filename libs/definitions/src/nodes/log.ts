import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `log` node as a definition holds it; what it does is the engine's `nodes/log.ts`. */
export const logSpec = defineNodeSpec({
  type: 'log',
  description: 'writes a log line',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }, { additionalProperties: false }),
});
