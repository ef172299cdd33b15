import { flowSpec } from '@agentry/definitions';
import { dataTypeOf } from '../chain/message.js';
import { NodeFailure, type RuleMsg, type SubChainResult } from '../chain/types.js';
import { defineNodeType } from './types.js';

/**
 * Runs chain `targetId` with the message (through `ctx.runChain`) and, as RuleGo's `flow`
 * (ChainNode.TellFlowAndMerge), merges the sub-chain's branch ends into one message: the input
 * message (its id and type) with the metadata of every end that did not fail added, and as data
 * the JSON list `[{msg, err, nodeId}]` of the ends (each message without its metadata, `nodeId`
 * the node it ended at; the same shape as `join`'s). It goes on along `Success`, or along
 * `Failure` when an end came along Failure or the sub-chain failed. With `extend: true` RuleGo
 * forwards each end on its own relation; Agentry's runner passes one message per node, so the
 * last end continues, on its relation. Nesting stops at `maxFlowDepth` (default 5) with an
 * error that names the chain path, which shows a cycle.
 */
export const flow = defineNodeType({
  ...flowSpec,
  async execute(msg, config, ctx) {
    const path = [...ctx.path, config.targetId];
    if (ctx.depth + 1 > ctx.maxFlowDepth) {
      throw new Error(`sub-chain depth limit ${ctx.maxFlowDepth} exceeded (${path.join(' -> ')}); do the chains call each other in a cycle?`);
    }
    const result = await ctx.runChain(config.targetId, msg, ctx.depth + 1, path);
    if (config.extend) {
      const last = result.ends.at(-1);
      return { msg: result.msg, relations: last?.relation?.split(',') ?? ['Success'] };
    }
    return merged(msg, result);
  },
});

const FAILURE = 'Failure';

/** TellFlowAndMerge: one message from every end; Failure when one of them failed. */
function merged(input: RuleMsg, result: SubChainResult): { msg: RuleMsg; relation: string } {
  const out: RuleMsg = { ...input, metadata: { ...input.metadata } };
  const items: unknown[] = [];
  let failure: string | undefined;
  for (const end of result.ends) {
    const err = end.relation === FAILURE ? end.msg.metadata.error || 'failed' : '';
    if (err) failure = err;
    else Object.assign(out.metadata, end.msg.metadata);
    const { id, type, data } = end.msg;
    items.push({ msg: { id, dataType: dataTypeOf(end.msg), type, data, metadata: {} }, err, nodeId: end.nodeId });
  }
  out.data = JSON.stringify(items);
  if (failure !== undefined) throw new NodeFailure(failure, out);
  return { msg: out, relation: 'Success' };
}
