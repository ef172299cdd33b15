import { AppError } from '@agentry/errors';
import { refusal, fillChainVars } from '@agentry/definitions';
import { nodeTypes } from '../nodes/index.js';
import { cloneMsg } from './message.js';
import { joinAncestors, type JoinAncestors } from './join-ancestors.js';
import { NodeFailure, type BranchMsg, type ChainContext, type JoinInput, type LoadResult, type NodeContext, type NodeExecutor, type ParsedChain, type RuleMsg } from './types.js';
import { context, trace } from '@opentelemetry/api';
import { markSpanFailed, startChildSpan } from '../tracing.js';

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
  /** Where the trace goes, when the caller reads it while the run is going (a run's steps); default a new array. */
  trace?: ChainTraceEntry[];
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
  /** Every branch end, in branch order (depth first, relation by relation), joins after their branches. */
  ends: ChainEnd[];
  /** One entry per node execution, plus the debugMode entries of sub-chains run by `flow` (before the flow node's own; `debug.chainId` names their chain). */
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
/** The longest setTimeout Node honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

type ChainFailure = (message: string, nodeId: string | undefined, cause?: unknown, msg?: RuleMsg) => ChainError;

/** The error of a run of `chain` that failed, carrying its trace so far. */
function failureIn(chain: ParsedChain, trace: ChainTraceEntry[]): ChainFailure {
  return (message, nodeId, cause, msg) => new ChainError(message, { chainId: chain.id, ...(nodeId ? { nodeId } : {}), trace, cause, ...(msg ? { msg } : {}) });
}

/** A message on its way to a node: from which node, along which relation (none for the first node). */
interface Step {
  nodeId: string;
  msg: RuleMsg;
  from?: string;
  relation?: string;
}

/** Where a node's message goes: every connection whose type is one of its relations, relation by relation in DSL order. */
function nextNodes(chain: ParsedChain, nodeId: string, relations: readonly string[], out: RuleMsg): Step[] {
  const edges = chain.outgoing.get(nodeId) ?? [];
  return relations.flatMap((relation) => edges.filter((c) => c.type === relation).map((c) => ({ nodeId: c.toId, msg: out, from: nodeId, relation })));
}

/** One run of one chain: what every branch shares. */
interface Walk {
  chain: ParsedChain;
  base: Omit<NodeContext, 'node'>;
  trace: ChainTraceEntry[];
  fail: ChainFailure;
  steps: number;
  joins: JoinAncestors;
}

/**
 * The messages reaching the joins below one node (their common ancestor) while its branches
 * run. A join runs once, when they have all ended, or at its timeout (counted from the first
 * arrival), then with `timedOut`; a branch arriving after that is dropped, as in RuleGo.
 */
class JoinScope {
  readonly arrivals = new Map<string, { msgs: BranchMsg[]; fired: boolean; timer?: NodeJS.Timeout }>();
  /** Joins run by their timeout, still going while the branches are. */
  readonly early: Array<Promise<ChainEnd[]>> = [];
  constructor(readonly ancestorId: string) {}

  close(): void {
    for (const entry of this.arrivals.values()) clearTimeout(entry.timer);
  }
}

/** A message reaching a join: the error is that of a message that came along Failure. */
function branchMsg(step: Step): BranchMsg {
  const err = step.relation === FAILURE ? step.msg.metadata.error || 'failed' : '';
  return { nodeId: step.from ?? '', msg: step.msg, err };
}

/** Waits for every promise (no branch is left running behind a failed run) and rethrows the first failure. */
async function settleAll<T>(promises: Array<Promise<T>>): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/**
 * Runs messages through parsed chains (`parseChain` / `ChainCache`). Execution starts at the
 * chain's first node (`metadata.firstNodeIndex`, default 0) and follows the connections whose
 * `type` equals the relation a node returns: `Success`, `Failure`, `True`, `False` or any name
 * a `jsSwitch` returns (exact, case-sensitive match; every matching connection, in DSL order).
 * Branches run one after the other, depth first, in relation order, except those a `fork`
 * starts (`parallel` node types), which run at the same time; either way `ends` lists branch
 * ends in branch order. A `join` (`join` node types) below several branches waits for the
 * branches of their lowest common ancestor and runs once with all the messages that reached it
 * (JoinScope). A relation without a connection ends its branch. A node that throws goes on
 * along `Failure` with its input message plus `metadata.error`; without a `Failure` connection
 * the whole run fails with a ChainError naming the chain and node (and carrying that message),
 * once every branch still running has ended. As RuleGo: `${vars.x}` and `${global.x}` in node
 * configurations are filled before each node runs, nodes in `debugMode` (or all, with the
 * chain's) leave their input and output in the trace, and `runById` refuses a chain with
 * `ruleChain.disabled`. Stateless: one runner serves any number of runs.
 */
export class ChainRunner {
  readonly maxSteps: number;
  readonly maxFlowDepth: number;
  readonly #executors: Readonly<Record<string, NodeExecutor>>;
  readonly #joins = new WeakMap<ParsedChain, JoinAncestors>();
  readonly #globals: () => Readonly<Record<string, string>>;

  constructor(opts: ChainRunnerOptions = {}) {
    this.maxSteps = opts.maxSteps ?? 1000;
    this.maxFlowDepth = opts.maxFlowDepth ?? 5;
    this.#executors = opts.executors ?? nodeTypes;
    this.#globals = opts.globals ?? (() => ({}));
  }

  async run(chain: ParsedChain, input: RuleMsg, ctx: ChainContext, opts: ChainRunOptions = {}): Promise<ChainResult> {
    const trace: ChainTraceEntry[] = opts.trace ?? [];
    const w: Walk = { chain, trace, fail: failureIn(chain, trace), steps: 0, joins: this.#joinsOf(chain), base: undefined as unknown as Walk['base'] };
    w.base = this.#nodeContext(w, ctx, opts);
    if (chain.firstNodeId === undefined) return { msg: cloneMsg(input), ends: [], trace, steps: 0 };
    const ends = await this.#walk(w, { nodeId: chain.firstNodeId, msg: cloneMsg(input) }, []);
    const last = ends[ends.length - 1];
    return { msg: last ? last.msg : cloneMsg(input), ends, trace, steps: w.steps };
  }

  /** Where each join's branches start, per chain (computed once per parsed chain and runner). */
  #joinsOf(chain: ParsedChain): JoinAncestors {
    let joins = this.#joins.get(chain);
    if (!joins) {
      joins = joinAncestors(chain, (type) => this.#executors[type]?.join !== undefined);
      this.#joins.set(chain, joins);
    }
    return joins;
  }

  /** Counts a step; refuses it after a cancel or past the step limit. */
  #step(w: Walk, nodeId: string): void {
    if (w.base.signal.aborted) throw w.fail(`chain "${w.chain.id}": cancelled`, nodeId, w.base.signal.reason);
    if (++w.steps > this.maxSteps) {
      throw w.fail(`chain "${w.chain.id}": step limit ${this.maxSteps} reached at node "${nodeId}"; does the chain loop?`, nodeId);
    }
  }

  /** Runs the branch starting at `step` to its ends (a join inside `scopes` only records its arrival). */
  async #walk(w: Walk, step: Step, scopes: readonly JoinScope[]): Promise<ChainEnd[]> {
    const executor = this.#executors[w.chain.nodes.get(step.nodeId)?.type ?? ''];
    let joined: JoinInput | undefined;
    if (executor?.join && step.from !== undefined) {
      const ancestor = w.joins.ancestorOf.get(step.nodeId);
      const scope = [...scopes].reverse().find((s) => s.ancestorId === ancestor);
      if (scope) {
        this.#arrive(w, scope, step, executor.join, scopes.slice(0, scopes.indexOf(scope)));
        return [];
      }
      // Not below its common ancestor (reached another way): it merges this message alone.
      joined = { msgs: [branchMsg(step)], timedOut: false };
    }
    this.#step(w, step.nodeId);
    const { out, relations } = await this.#execute(step, w, joined);
    return this.#follow(w, step.nodeId, relations, out, scopes);
  }

  /** Sends a node's output along its relations: one branch per connection, then the joins it is the ancestor of. */
  async #follow(w: Walk, nodeId: string, relations: readonly string[], out: RuleMsg, scopes: readonly JoinScope[]): Promise<ChainEnd[]> {
    const next = nextNodes(w.chain, nodeId, relations, out);
    if (next.length === 0) return [{ nodeId, relation: relations.length === 0 ? undefined : relations.join(','), msg: out }];
    const scope = w.joins.joinsBelow.has(nodeId) ? new JoinScope(nodeId) : undefined;
    const inner = scope ? [...scopes, scope] : scopes;
    // Each branch gets its own copy.
    const branches = next.map((n) => ({ ...n, msg: next.length === 1 ? n.msg : cloneMsg(n.msg) }));
    try {
      const ends: ChainEnd[] = [];
      if (this.#executors[w.chain.nodes.get(nodeId)?.type ?? '']?.parallel) {
        ends.push(...(await settleAll(branches.map((b) => this.#walk(w, b, inner)))).flat());
      } else {
        for (const b of branches) ends.push(...(await this.#walk(w, b, inner)));
      }
      if (scope) ends.push(...(await this.#fireJoins(w, scope, scopes)));
      return ends;
    } catch (err) {
      // A join its timeout started is part of the run: let it end before the run fails.
      scope?.close();
      if (scope) await Promise.allSettled(scope.early);
      throw err;
    } finally {
      scope?.close();
    }
  }

  /** Records a message reaching a join; the first arrival starts its timeout. */
  #arrive(w: Walk, scope: JoinScope, step: Step, join: NonNullable<NodeExecutor['join']>, outer: readonly JoinScope[]): void {
    let entry = scope.arrivals.get(step.nodeId);
    if (!entry) {
      const created: { msgs: BranchMsg[]; fired: boolean; timer?: NodeJS.Timeout } = { msgs: [], fired: false };
      // setTimeout fires at once past 2^31 - 1 ms.
      const ms = Math.min(join.timeoutMs(w.chain.nodes.get(step.nodeId)?.configuration ?? {}), MAX_TIMER_MS);
      created.timer = setTimeout(() => {
        created.fired = true;
        const run = this.#runJoin(w, step.nodeId, { msgs: [...created.msgs], timedOut: true }, outer);
        run.catch(() => undefined); // awaited (and rethrown) by #fireJoins
        scope.early.push(run);
      }, ms);
      scope.arrivals.set(step.nodeId, created);
      entry = created;
    }
    if (entry.fired) {
      w.base.logger.warn({ chainId: w.chain.id, nodeId: step.nodeId, from: step.from }, 'a branch reached a join after its timeout; its message is dropped');
      return;
    }
    entry.msgs.push(branchMsg(step));
  }

  /** Runs the joins of `scope` that have not timed out, then waits for those that have. */
  async #fireJoins(w: Walk, scope: JoinScope, outer: readonly JoinScope[]): Promise<ChainEnd[]> {
    scope.close();
    const ends: ChainEnd[] = [];
    for (const [joinId, entry] of scope.arrivals) {
      if (entry.fired) continue;
      entry.fired = true;
      ends.push(...(await this.#runJoin(w, joinId, { msgs: entry.msgs, timedOut: false }, outer)));
    }
    for (const early of scope.early) ends.push(...(await early));
    return ends;
  }

  /** Runs a join node with the messages that reached it, then follows it. */
  async #runJoin(w: Walk, joinId: string, joined: JoinInput, scopes: readonly JoinScope[]): Promise<ChainEnd[]> {
    this.#step(w, joinId);
    const first = joined.msgs[0]?.msg as RuleMsg;
    const { out, relations } = await this.#execute({ nodeId: joinId, msg: cloneMsg(first) }, w, joined);
    return this.#follow(w, joinId, relations, out, scopes);
  }

  /** What every node of this run sees besides itself. */
  #nodeContext(w: Walk, ctx: ChainContext, opts: ChainRunOptions): Omit<NodeContext, 'node'> {
    // Built field by field (not spread) so that a context whose functions are class methods works.
    return {
      logger: ctx.logger,
      signal: ctx.signal,
      sandbox: ctx.sandbox,
      // The sub-chain's debug steps show in this run's, as RuleGo's OnDebug sees sub-chain nodes.
      runChain: async (id, msg, d, p) => {
        const sub = await ctx.runChain(id, msg, d, p);
        w.trace.push(...((sub.trace ?? []) as ChainTraceEntry[]).filter((t) => t.debug !== undefined));
        return sub;
      },
      complete: (req) => ctx.complete(req),
      runAgent: (config, msg, node) => ctx.runAgent(config, msg, node),
      ...(ctx.http ? { http: ctx.http } : {}),
      ...(ctx.authority ? { authority: ctx.authority } : {}),
      chain: w.chain,
      depth: opts.depth ?? 0,
      path: opts.path ?? [w.chain.id],
      maxFlowDepth: this.maxFlowDepth,
      runNode: async (nodeId, msg) => {
        this.#step(w, nodeId);
        const done = await this.#runOne({ nodeId, msg: cloneMsg(msg) }, w);
        return { msg: done.out, relations: 'error' in done ? [FAILURE] : done.relations };
      },
    };
  }

  /** Runs one node and traces it; a throw comes back as `error` with the message to pass along Failure. */
  async #runOne(
    { nodeId, msg }: Step,
    w: Walk,
    joined?: JoinInput,
  ): Promise<{ out: RuleMsg; relations: readonly string[] } | { out: RuleMsg; error: unknown; message: string }> {
    const { chain } = w;
    const node = chain.nodes.get(nodeId);
    if (!node) throw w.fail(`chain "${chain.id}": no node "${nodeId}"`, nodeId);
    const executor = this.#executors[node.type];
    if (!executor) throw w.fail(`chain "${chain.id}", node "${node.id}" (${node.type}): no executor for node type "${node.type}"`, nodeId);
    const started = performance.now();
    // RuleGo's debugMode: the node's own, or the chain's for all of its nodes.
    const debugIn = node.debugMode || chain.dsl.ruleChain.debugMode ? cloneMsg(msg) : undefined;
    const debug = (out: RuleMsg) => (debugIn ? { debug: { chainId: chain.id, in: debugIn, out: cloneMsg(out) } } : {});
    // A traced run's node is a span too (ended with its trace entry; a failure marks it failed).
    const span = startChildSpan(`chain node ${node.type}`, { 'agentry.chain.id': chain.id, 'agentry.chain.node.id': nodeId, 'agentry.chain.node.type': node.type });
    try {
      const config = fillChainVars(node.configuration ?? {}, { vars: chain.vars ?? {}, global: this.#globals() });
      assertNodeAllowed(w.base, executor, config);
      const run = () => executor.execute(msg, config, { ...w.base, node, ...(joined ? { joined } : {}) });
      const result = span ? await context.with(trace.setSpan(context.active(), span), run) : await run();
      const relations = 'relations' in result ? result.relations : [result.relation];
      w.trace.push({ nodeId, type: node.type, relations: [...relations], ms: elapsed(started), ...debug(result.msg) });
      span?.setAttribute('agentry.chain.relations', [...relations]);
      return { out: result.msg, relations };
    } catch (error) {
      const message = errorMessage(error);
      const failed = error instanceof NodeFailure && error.msg ? error.msg : msg;
      const out = { ...failed, metadata: { ...failed.metadata, error: message } };
      w.trace.push({ nodeId, type: node.type, relations: [FAILURE], ms: elapsed(started), error: message, ...debug(out) });
      if (span) markSpanFailed(span, error);
      return { out, error, message };
    } finally {
      span?.end();
    }
  }

  /**
   * Runs one node. A node that throws goes on along `Failure` (its input, or the message of a
   * NodeFailure, with `metadata.error`) when it has such a connection; otherwise the run fails.
   */
  async #execute(step: Step, w: Walk, joined?: JoinInput): Promise<{ out: RuleMsg; relations: readonly string[] }> {
    const done = await this.#runOne(step, w, joined);
    if (!('error' in done)) return done;
    const { chain, base } = w;
    const node = chain.nodes.get(step.nodeId) as NonNullable<ReturnType<typeof chain.nodes.get>>;
    if (base.signal.aborted) throw w.fail(`chain "${chain.id}": cancelled`, step.nodeId, base.signal.reason);
    if (!(chain.outgoing.get(step.nodeId) ?? []).some((c) => c.type === FAILURE)) {
      // A sub-chain's error already names its chain and node: keep it as it is.
      const { error, out } = done;
      throw error instanceof ChainError
        ? w.fail(error.message, step.nodeId, error, out)
        : w.fail(`chain "${chain.id}", node "${node.id}" (${node.type}): ${done.message}`, step.nodeId, error, out);
    }
    return { out: done.out, relations: [FAILURE] };
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
    let inner = ctx;
    if (ctx.enterChain) {
      try {
        inner = await ctx.enterChain(loaded.chain);
      } catch (err) {
        throw new ChainError(`chain "${id}": ${errorMessage(err)}`, { chainId: id, cause: err });
      }
    }
    return this.run(loaded.chain, msg, inner, opts);
  }
}

/**
 * Asks the authority policy about every power a node's resolved configuration holds, before it
 * runs: a refusal fails the node (along Failure, as any node error).
 */
function assertNodeAllowed(base: Omit<NodeContext, 'node'>, executor: NodeExecutor, config: Record<string, unknown>): void {
  if (!base.authority || !executor.capabilities) return;
  for (const cap of executor.capabilities(config)) {
    const why = refusal(base.authority, cap);
    if (why !== undefined) throw new AppError('FORBIDDEN', 403, `refused: ${why}`);
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : JSON.stringify(err) ?? String(err);
}
