import Type from 'typebox';
import { defineNodeType } from './types.js';

/** Runs another chain (by id) as a sub-chain. */
export const flow = defineNodeType({
  type: 'flow',
  description: 'runs another rule chain',
  configuration: Type.Object({
    targetId: Type.String({ minLength: 1, description: 'id of the chain to run' }),
    extend: Type.Optional(Type.Boolean()),
  }),
});
