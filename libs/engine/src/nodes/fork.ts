import { forkSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/**
 * RuleGo's parallel gateway: passes the message on along `Success`, and the runner runs the
 * branches it starts at the same time (other nodes' branches run one after the other). A `join`
 * below merges what the branches produce.
 */
export const fork = defineNodeType({
  ...forkSpec,
  parallel: true,
  async execute(msg) {
    return { msg, relation: 'Success' };
  },
});
