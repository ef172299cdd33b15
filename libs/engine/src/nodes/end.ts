import { endSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** Ends the branch; the message at this point is a result of the run. */
export const end = defineNodeType({
  ...endSpec,
  async execute(msg) {
    return { msg, relations: [] };
  },
});
