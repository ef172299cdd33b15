import { dataTypeOf, parseMsgData } from '../chain/message.js';
import { NodeFailure, type BranchMsg, type RuleMsg } from '../chain/types.js';
import { joinSpec } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** RuleGo's default, in seconds, also for 0 or less. */
const JOIN_DEFAULT_TIMEOUT_S = 30;

/**
 * Merges parallel branches (RuleGo's `join`). The runner collects the messages that reach it
 * below the branches' common ancestor and runs it once when they have all ended (see
 * ChainRunner). The result keeps the first arrival's id and type, its metadata plus that of
 * every branch that succeeded, and as data either the list `[{msg, err, nodeId}]` (each
 * branch's message without metadata, `nodeId` the node it came from) or, with `mergeToMap`, one
 * object: JSON-object data merged key by key, anything else under its node id. A branch that
 * came along Failure, or the `timeout` (seconds, default 30) passing first, sends it along
 * Failure.
 */
export const join = defineNodeType({
  ...joinSpec,
  join: { timeoutMs: (config) => timeoutSeconds(config.timeout) * 1000 },
  async execute(msg, config, ctx) {
    const arrived = ctx.joined?.msgs ?? [{ nodeId: '', msg, err: '' }];
    if (ctx.joined?.timedOut) {
      throw new NodeFailure(`timed out after ${timeoutSeconds(config.timeout)} s waiting for the parallel branches (${arrived.length} arrived)`, msg);
    }
    const merged: RuleMsg = { ...msg, metadata: { ...msg.metadata } };
    const errors: string[] = [];
    for (const b of arrived) {
      if (b.err) errors.push(`NodeId=${b.nodeId},Err=${b.err}`);
      else Object.assign(merged.metadata, b.msg.metadata);
    }
    merged.data = JSON.stringify(config.mergeToMap ? mergeToMap(arrived) : arrived.map(listItem));
    if (errors.length > 0) throw new NodeFailure(errors.join(' '), merged);
    return { msg: merged, relation: 'Success' };
  },
});

function timeoutSeconds(timeout: number | undefined): number {
  return timeout !== undefined && timeout > 0 ? timeout : JOIN_DEFAULT_TIMEOUT_S;
}

function listItem(b: BranchMsg): unknown {
  const { msg } = b;
  return { msg: { id: msg.id, dataType: dataTypeOf(msg), type: msg.type, data: msg.data, metadata: {} }, err: b.err, nodeId: b.nodeId };
}

function mergeToMap(arrived: readonly BranchMsg[]): Record<string, unknown> {
  // No prototype: a branch's "__proto__" key stays a key.
  const out = Object.create(null) as Record<string, unknown>;
  for (const b of arrived) {
    const value = parseMsgData(b.msg.data);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) out[k] = v;
    } else out[b.nodeId] = value;
  }
  return out;
}
