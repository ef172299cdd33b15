import Type from 'typebox';
import { defineNodeType } from './types.js';

/** A script returning relation names; routes along each of them. */
export const jsSwitch = defineNodeType({
  type: 'jsSwitch',
  description: 'routes along the relations a script returns',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }),
});
