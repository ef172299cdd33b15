import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `jsSwitch` node as a definition holds it; what it does is the engine's `nodes/js-switch.ts`. */
export const jsSwitchSpec = defineNodeSpec({
  type: 'jsSwitch',
  description: 'routes along the relations a script returns',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }, { additionalProperties: false }),
});
