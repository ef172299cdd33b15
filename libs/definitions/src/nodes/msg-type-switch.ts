import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `msgTypeSwitch` node as a definition holds it; what it does is the engine's `nodes/msg-type-switch.ts`. */
export const msgTypeSwitchSpec = defineNodeSpec({
  type: 'msgTypeSwitch',
  description: 'routes along the relation named by the message type, else Default',
  configuration: Type.Object({}, { additionalProperties: false }),
});
