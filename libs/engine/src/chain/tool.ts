import { createRuleMsg, parseMsgData, toMetadataValue, toMsgData } from './message.js';
import { ChainError, type ChainEnd, type ChainResult, type ChainTraceEntry } from './runner.js';
import type { RuleMsg } from './types.js';

/**
 * A rule chain called as a tool carries a message, as RuleGo's `OnMsg` does, not only a JSON
 * object. The tool entry's `config` says what the message is besides the model's arguments:
 * - `msgType`: the message type (default `MESSAGE`);
 * - `metadata`: metadata every call starts with (values as text; a non-string as JSON);
 * - `dataField`: take `msg.data` from this one argument (a string as it is, any other JSON value
 *   as JSON) instead of the whole arguments object.
 */
export interface ChainToolConfig {
  msgType?: unknown;
  metadata?: unknown;
  dataField?: unknown;
}

/** The message a chain tool starts with. */
export function chainToolInput(args: Record<string, unknown>, config: ChainToolConfig | undefined): RuleMsg {
  const field = typeof config?.dataField === 'string' ? config.dataField : undefined;
  const data = field === undefined ? args : args[field];
  const metadata: Record<string, string> = {};
  if (config?.metadata && typeof config.metadata === 'object' && !Array.isArray(config.metadata)) {
    for (const [k, v] of Object.entries(config.metadata)) metadata[k] = toMetadataValue(v);
  }
  const type = typeof config?.msgType === 'string' && config.msgType !== '' ? config.msgType : undefined;
  return createRuleMsg({ data: data === undefined ? '' : toMsgData(data), metadata, ...(type ? { type } : {}) });
}

/** One end of a chain as the tool result shows it: `data` parsed when it is JSON. */
export interface ChainToolEnd {
  relation: string;
  msgType: string;
  metadata: Record<string, string>;
  data: unknown;
}

/**
 * What a chain tool answers: the final message with its metadata, message type and the relation
 * that ended it (`Failure` with `error` when a node failed and had no Failure connection, as
 * RuleGo ends such a message); `ends` when branches ended more than once (the final is the last);
 * `debug` with each node's input, output and relation when the chain or a node has debugMode.
 */
export interface ChainToolResult extends ChainToolEnd {
  error?: string;
  ends?: ChainToolEnd[];
  debug?: Array<{ chainId: string; nodeId: string; relation: string; in: RuleMsg; out: RuleMsg; error?: string }>;
}

function end(msg: RuleMsg, relation: string | undefined): ChainToolEnd {
  // An `end` node ends on Success, as RuleGo's end node does.
  return { relation: relation ?? 'Success', msgType: msg.type, metadata: msg.metadata, data: parseMsgData(msg.data) };
}

function debugSteps(trace: readonly ChainTraceEntry[]): Pick<ChainToolResult, 'debug'> {
  const steps = trace.flatMap((t) =>
    t.debug ? [{ chainId: t.debug.chainId, nodeId: t.nodeId, relation: t.relations.join(','), in: t.debug.in, out: t.debug.out, ...(t.error ? { error: t.error } : {}) }] : [],
  );
  return steps.length > 0 ? { debug: steps } : {};
}

/** The result of a run that completed. */
export function chainToolResult(result: ChainResult, input: RuleMsg): ChainToolResult {
  const ends: ChainEnd[] = result.ends;
  const last = ends.at(-1);
  const final = last ? end(last.msg, last.relation) : end(input, undefined);
  return { ...final, ...(ends.length > 1 ? { ends: ends.map((e) => end(e.msg, e.relation)) } : {}), ...debugSteps(result.trace) };
}

/**
 * A node failure the chain did not route: the message ends on `Failure` with the error. Other
 * failures (the chain missing or disabled, a cancel, the step limit) are undefined: they stay
 * errors of the tool call.
 */
export function chainToolFailure(err: unknown): ChainToolResult | undefined {
  if (!(err instanceof ChainError) || !err.msg || !err.nodeId) return undefined;
  return { ...end(err.msg, 'Failure'), error: err.message, ...debugSteps(err.trace) };
}
