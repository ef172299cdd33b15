import { nodeTypes } from '../nodes/index.js';
import { cloneMsg } from './message.js';
import { fillChainVars } from './vars.js';
import { NodeFailure, type ChainContext, type LoadResult, type NodeContext, type NodeExecutor, type ParsedChain, type RuleMsg } from './types.js';

interface ChainRunnerOptions {
  /** Node executions per run (sub-chains count their own); more is an error. Default 1000. */
  maxSteps?: number;
  /** Nested `flow` levels. Default 5. */
  maxFlowDepth?: number;
  /** What runs each node type, by type; default the registry `nodeTypes` (tests may pass their own). */
  executors?: Readonly<Record<string, NodeExecutor>>;
  /** The server-level map `${global.x}` reads, asked at each node (configuration changes live). */
  globals?: () => Readonly<Record<string, string>>;
}

export interface ChainRunOptions {
  /** 0 for a top-level run; `flow` passes its depth + 1. */
  depth?: number;
  /** Chain ids from the outermost run down to this chain; default `[chain.id]`. */
  path?: readonly string[];
}

/** One node execution. */
export interface ChainTraceEntry {
  nodeId: string;
  type: string;
  /** The relations the node chose (`Failure` after an error it was routed by; `[]` for `end`). */
  relations: string[];
  ms: number;
  error?: string;
  /** With `debugMode` (the node's or the chain's): the message the node got and the one it passed on, as RuleGo's OnDebug sees them. */
  debug?: { chainId: string; in: RuleMsg; out: RuleMsg };
}

/** The refusal RuleGo gives, in its words, for a chain switched off with `ruleChain.disabled`. */
export const CHAIN_DISABLED = 'the rule chain has been disabled';

/** Where a branch stopped: an `end` node (`relation` undefined) or a node with no edge for its relation. */
export interface ChainEnd {
  nodeId: string;
  relation: string | undefined;
  msg: RuleMsg;
}

export interface ChainResult {
  /** The last message that reached an end (the input when the chain has no nodes). */
  msg: RuleMsg;
  /** Every branch end, in execution order. */
  ends: ChainEnd[];
  trace: ChainTraceEntry[];
  steps: number;
}

/** A run that failed: a node error without a `Failure` edge, the step limit, a cancel. */
export class ChainError extends Error {
  readonly chainId: string;
  readonly nodeId: string | undefined;
  /** The trace up to the failure (empty when the error came from loading). */
  readonly trace: ChainTraceEntry[];
  /** For a node error without a `Failure` connection: the message RuleGo would end on Failure (the node's input, or its NodeFailure's message, with `metadata.error`). */
  readonly msg: RuleMsg | undefined;
  constructor(message: string, info: { chainId: string; nodeId?: string; trace?: ChainTraceEntry[]; cause?: unknown; msg?: RuleMsg }) {
    super(message, info.cause === undefined ? undefined : { cause: info.cause });
    this.name = 'ChainError';
    this.chainId = info.chainId;
    this.nodeId = info.nodeId;
    this.trace = info.trace ?? [];
    this.msg = info.msg;
  }
}

const FAILURE = 'Failure';

type ChainFailure = (message: string, nodeId: string | undefined, cause?: unknown, msg?: RuleMsg) => ChainError;

/** The error of a run of `chain` that failed, carrying its trace so far. */
function failureIn(chain: ParsedChain, trace: ChainTraceEntry[]): ChainFailure {
  return (message, nodeId, cause, msg) => new ChainError(message, { chainId: chain.id, ...(nodeId ? { nodeId } : {}), trace, cause, ...(msg ? { msg } : {}) });
}

/** Where a node's message goes: every connection whose type is one of its relations, relation by relation in DSL order. */
function nextNodes(chain: ParsedChain, nodeId: string, relations: readonly string[], out: RuleMsg): Array<{ nodeId: string; msg: RuleMsg }> {
  const edges = chain.outgoing.get(nodeId) ?? [];
  return relations.flatMap((relation) => edges.filter((c) => c.type === relation).map((c) => ({ nodeId: c.toId, msg: out })));
}

/**
 * Runs messages through parsed chains (`parseChain` / `ChainCache`). Execution starts at the
 * chain's first node (`metadata.firstNodeIndex`, default 0) and follows the connections whose
 * `type` equals the relation a node returns: `Success`, `Failure`, `True`, `False` or any name
 * a `jsSwitch` returns (exact, case-sensitive match; every matching connection, in DSL order).
 * Branches run one after the other, depth first, in relation order. A relation without a
 * connection ends its branch. A node that throws goes on along `Failure` with its input
 * message plus `metadata.error`; without a `Failure` connection the whole run fails with a
 * ChainError naming the chain and node (and carrying that message). As RuleGo: `${vars.x}` and
 * `${global.x}` in node configurations are filled before each node runs, nodes in `debugMode`
 * (or all, with the chain's) leave their input and output in the trace, and `runById` refuses a
 * chain with `ruleChain.disabled`. Stateless: one runner serves any number of runs.
 */
export class ChainRunner {
  readonly maxSteps: number;
  readonly maxFlowDepth: number;
  readonly #executors: Readonly<Record<string, NodeExecutor>>;
  readonly #globals: () => Readonly<Record<string, string>>;

  constructor(opts: ChainRunnerOptions = {}) {
    this.maxSteps = opts.maxSteps ?? 1000;
    this.maxFlowDepth = opts.maxFlowDepth ?? 5;
    this.#executors = opts.executors ?? nodeTypes;
    this.#globals = opts.globals ?? (() => ({}));
  }

  async run(chain: ParsedChain, input: RuleMsg, ctx: ChainContext, opts: ChainRunOptions = {}): Promise<ChainResult> {
    const trace: ChainTraceEntry[] = [];
    const ends: ChainEnd[] = [];
    const fail = failureIn(chain, trace);
    const base = this.#nodeContext(chain, ctx, opts);
    const stack: Array<{ nodeId: string; msg: RuleMsg }> = [];
    if (chain.firstNodeId !== undefined) stack.push({ nodeId: chain.firstNodeId, msg: cloneMsg(input) });
    let steps = 0;
    while (stack.length > 0) {
      const { nodeId, msg } = stack.pop() as { nodeId: string; msg: RuleMsg };
      if (ctx.signal.aborted) throw fail(`chain "${chain.id}": cancelled`, nodeId, ctx.signal.reason);
      if (++steps > this.maxSteps) {
        throw fail(`chain "${chain.id}": step limit ${this.maxSteps} reached at node "${nodeId}"; does the chain loop?`, nodeId);
      }
      const { out, relations } = await this.#execute({ nodeId, msg }, base, trace, fail);
      const next = nextNodes(chain, nodeId, relations, out);
      if (next.length === 0) {
        ends.push({ nodeId, relation: relations.length === 0 ? undefined : relations.join(','), msg: out });
        continue;
      }
      // Each branch gets its own copy; the first is run first (depth first).
      for (let i = next.length - 1; i >= 0; i--) {
        const item = next[i] as { nodeId: string; msg: RuleMsg };
        stack.push({ nodeId: item.nodeId, msg: next.length === 1 ? item.msg : cloneMsg(item.msg) });
      }
    }
    const last = ends[ends.length - 1];
    return { msg: last ? last.msg : cloneMsg(input), ends, trace, steps };
  }

  /** What every node of this run sees besides itself. */
  #nodeContext(chain: ParsedChain, ctx: ChainContext, opts: ChainRunOptions): Omit<NodeContext, 'node'> {
    // Built field by field (not spread) so that a context whose functions are class methods works.
    return {
      logger: ctx.logger,
      signal: ctx.signal,
      sandbox: ctx.sandbox,
      runChain: (id, msg, d, p) => ctx.runChain(id, msg, d, p),
      complete: (req) => ctx.complete(req),
      runAgent: (config, msg) => ctx.runAgent(config, msg),
      ...(ctx.http ? { http: ctx.http } : {}),
      chain,
      depth: opts.depth ?? 0,
      path: opts.path ?? [chain.id],
      maxFlowDepth: this.maxFlowDepth,
    };
  }

  /**
   * Runs one node and traces it. A node that throws goes on along `Failure` (its input, or the
   * message of a NodeFailure, with `metadata.error`) when it has such a connection; otherwise
   * the run fails.
   */
  async #execute(
    { nodeId, msg }: { nodeId: string; msg: RuleMsg },
    base: Omit<NodeContext, 'node'>,
    trace: ChainTraceEntry[],
    fail: ChainFailure,
  ): Promise<{ out: RuleMsg; relations: readonly string[] }> {
    const { chain, signal } = base;
    const node = chain.nodes.get(nodeId);
    if (!node) throw fail(`chain "${chain.id}": no node "${nodeId}"`, nodeId);
    const where = `chain "${chain.id}", node "${node.id}" (${node.type})`;
    const executor = this.#executors[node.type];
    if (!executor) throw fail(`${where}: no executor for node type "${node.type}"`, nodeId);
    const started = performance.now();
    // RuleGo's debugMode: the node's own, or the chain's for all of its nodes.
    const debugIn = node.debugMode || chain.dsl.ruleChain.debugMode ? cloneMsg(msg) : undefined;
    const debug = (out: RuleMsg) => (debugIn ? { debug: { chainId: chain.id, in: debugIn, out: cloneMsg(out) } } : {});
    try {
      const config = fillChainVars(node.configuration ?? {}, { vars: chain.vars ?? {}, global: this.#globals() });
      const result = await executor.execute(msg, config, { ...base, node });
      const relations = 'relations' in result ? result.relations : [result.relation];
      trace.push({ nodeId, type: node.type, relations: [...relations], ms: elapsed(started), ...debug(result.msg) });
      return { out: result.msg, relations };
    } catch (err) {
      const message = errorMessage(err);
      const failed = err instanceof NodeFailure && err.msg ? err.msg : msg;
      const out = { ...failed, metadata: { ...failed.metadata, error: message } };
      trace.push({ nodeId, type: node.type, relations: [FAILURE], ms: elapsed(started), error: message, ...debug(out) });
      if (signal.aborted) throw fail(`chain "${chain.id}": cancelled`, nodeId, signal.reason);
      if (!(chain.outgoing.get(nodeId) ?? []).some((c) => c.type === FAILURE)) {
        // A sub-chain's error already names its chain and node: keep it as it is.
        throw err instanceof ChainError ? fail(err.message, nodeId, err, out) : fail(`${where}: ${message}`, nodeId, err, out);
      }
      return { out, relations: [FAILURE] };
    }
  }

  /**
   * Loads chain `id` (`load` is typically `(id) => cache.get(id)`) and runs it: the usual body
   * of `ChainContext.runChain`. Rejects with a ChainError when the chain does not exist or does
   * not load.
   */
  async runById(
    load: (id: string) => Promise<LoadResult | undefined> | LoadResult | undefined,
    id: string,
    msg: RuleMsg,
    ctx: ChainContext,
    opts: ChainRunOptions = {},
  ): Promise<ChainResult> {
    const loaded = await load(id);
    if (!loaded) throw new ChainError(`chain "${id}" does not exist`, { chainId: id });
    if (!loaded.ok) throw new ChainError(`chain "${id}" does not load: ${loaded.error}`, { chainId: id });
    // As RuleGo: a disabled chain runs for nobody (a flow node, a tool); agents refuse earlier with their own words.
    if (loaded.chain.dsl.ruleChain.disabled === true) throw new ChainError(`chain "${id}": ${CHAIN_DISABLED}`, { chainId: id });
    return this.run(loaded.chain, msg, ctx, opts);
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : JSON.stringify(err) ?? String(err);
}
