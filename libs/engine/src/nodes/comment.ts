import { commentSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * RuleGo's `comment`: a note on the canvas that a message may still pass through, unchanged,
 * along `Success`. Its text lives in the node's `name` and `additionalInfo`, as editors write it.
 */
export const comment = defineNodeType({
  ...commentSpec,
  async execute(msg) {
    return { msg, relation: 'Success' };
  },
});
