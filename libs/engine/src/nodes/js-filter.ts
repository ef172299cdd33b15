import Type from 'typebox';
import { defineNodeType } from './types.js';

/** A script returning a boolean; routes along `True` or `False`. */
export const jsFilter = defineNodeType({
  type: 'jsFilter',
  description: 'routes along True or False by the result of a script',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }),
});
