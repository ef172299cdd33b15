import { msgTypeSwitchSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** RuleGo's relation for a message type no connection names. */
const DEFAULT_RELATION = 'Default';

/**
 * Routes by message type (RuleGo's `msgTypeSwitch`): along the connections whose relation is the
 * message's `type`, or along `Default` when the node has none for it (exact, case-sensitive).
 */
export const msgTypeSwitch = defineNodeType({
  ...msgTypeSwitchSpec,
  async execute(msg, _config, ctx) {
    const edges = ctx.chain.outgoing.get(ctx.node.id) ?? [];
    return { msg, relation: edges.some((c) => c.type === msg.type) ? msg.type : DEFAULT_RELATION };
  },
});
