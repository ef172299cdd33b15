import type { JsonValue } from '@agentry/db';
import type { ChainTraceEntry } from '../../chain/runner.js';

/** At most this many steps are kept on a run (a chain in a loop could run thousands of nodes). */
export const MAX_RUN_STEPS = 500;
/** A debug message (a node's input or output) larger than this, as JSON, is cut to it. */
export const MAX_DEBUG_CHARS = 64 * 1024;

/**
 * A chain's trace as a run stores it (`runs.steps`): the first MAX_RUN_STEPS entries, then one
 * marker entry saying how many were left out; a debug message over MAX_DEBUG_CHARS becomes
 * `{truncated: true, chars, preview}` so one huge message cannot bloat the row.
 */
export function boundSteps(trace: readonly ChainTraceEntry[], extra: readonly ChainTraceEntry[] = []): JsonValue[] {
  const all = [...trace, ...extra];
  const kept = all.slice(0, MAX_RUN_STEPS).map(stepJson);
  if (all.length > MAX_RUN_STEPS) kept.push({ nodeId: '', type: 'truncated', relations: [], ms: 0, error: `${all.length - MAX_RUN_STEPS} more steps were not recorded` });
  return kept;
}

function stepJson(e: ChainTraceEntry): JsonValue {
  return {
    nodeId: e.nodeId,
    type: e.type,
    relations: [...e.relations],
    ms: Math.round(e.ms * 100) / 100,
    ...(e.error !== undefined ? { error: e.error } : {}),
    ...(e.debug ? { debug: { chainId: e.debug.chainId, in: boundMessage(e.debug.in), out: boundMessage(e.debug.out) } } : {}),
  };
}

function boundMessage(msg: unknown): JsonValue {
  const json = JSON.stringify(msg) ?? 'null';
  if (json.length <= MAX_DEBUG_CHARS) return JSON.parse(json) as JsonValue;
  return { truncated: true, chars: json.length, preview: json.slice(0, MAX_DEBUG_CHARS) };
}
