import Type from 'typebox';
import { defineNodeType } from './types.js';

/** Ends the chain; the message at this point is the chain's result. */
export const end = defineNodeType({
  type: 'end',
  description: 'ends the chain',
  configuration: Type.Object({}),
});
