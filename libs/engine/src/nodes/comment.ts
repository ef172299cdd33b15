import Type from 'typebox';
import { defineNodeType } from './types.js';

/**
 * RuleGo's `comment`: a note on the canvas that a message may still pass through, unchanged,
 * along `Success`. Its text lives in the node's `name` and `additionalInfo`, as editors write it.
 */
export const comment = defineNodeType({
  type: 'comment',
  description: 'a note for the editor; passes the message on unchanged',
  configuration: Type.Object({}, { additionalProperties: false }),
  async execute(msg) {
    return { msg, relation: 'Success' };
  },
});
