import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `comment` node as a definition holds it; what it does is the engine's `nodes/comment.ts`. */
export const commentSpec = defineNodeSpec({
  type: 'comment',
  description: 'a note for the editor; passes the message on unchanged',
  configuration: Type.Object({}, { additionalProperties: false }),
});
