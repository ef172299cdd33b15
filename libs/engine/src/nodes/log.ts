import Type from 'typebox';
import { defineNodeType } from './types.js';

/** Logs a line built by a script (or the message when there is none). */
export const log = defineNodeType({
  type: 'log',
  description: 'writes a log line',
  configuration: Type.Object({ jsScript: Type.Optional(Type.String()) }),
});
