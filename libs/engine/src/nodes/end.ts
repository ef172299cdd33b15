import Type from 'typebox';
import { defineNodeType } from './types.js';

/** Ends the branch; the message at this point is a result of the run. */
export const end = defineNodeType({
  type: 'end',
  description: 'ends the chain',
  configuration: Type.Object({}, { additionalProperties: false }),
  async execute(msg) {
    return { msg, relations: [] };
  },
});
