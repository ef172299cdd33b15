import Type from 'typebox';
import { defineNodeType } from './types.js';

/** A script returning `{msg, metadata, msgType}` that replaces the message. */
export const jsTransform = defineNodeType({
  type: 'jsTransform',
  description: 'rewrites the message with a script',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }),
});
