import type { Logger } from 'pino';
import type { AiAgentConfig, Capability, LoadResult, ParsedChain, RuleNode, RunAuthority } from '@agentry/definitions';
import type { ChatMessage } from '../models/types.js';
import type { ScriptSandbox } from '../sandbox/sandbox.js';
import type { AddressPolicy } from '../tools/net-policy.js';

export type { AiAgentConfig, LoadResult, ParsedChain };

/**
 * A message travelling through a rule chain (RuleGo's shape): `data` is text, usually JSON;
 * `metadata` holds string values only (`firstNodeIndex`, `status`, ...).
 */
export type RuleMsg = {
  id: string;
  type: string;
  data: string;
  metadata: Record<string, string>;
};

/** What a sub-chain run gives its `flow` node (a ChainResult is one). */
export interface SubChainResult {
  /** The last message that reached an end. */
  msg: RuleMsg;
  /** Every branch end: `relation` undefined for an `end` node. */
  ends: ReadonlyArray<{ nodeId: string; relation: string | undefined; msg: RuleMsg }>;
  /** The sub-chain's node executions; those with `debug` join the calling run's trace. */
  trace?: ReadonlyArray<{ debug?: unknown }>;
}

/** One completion without tools (the `ai/llm` node). */
export interface CompleteRequest {
  provider?: string;
  model?: string;
  messages: ChatMessage[];
  params?: Record<string, unknown>;
  signal: AbortSignal;
}

/**
 * What a chain run needs from its caller. The engine opens nothing itself: the sandbox, the
 * model calls, the agent loop and sub-chain loading come in here.
 */
export interface ChainContext {
  logger: Logger;
  /** Aborting stops the run between nodes and cancels the running node's script, HTTP call or model call. */
  signal: AbortSignal;
  /** Where scripts run; the caller may bind its `key` (the agent) so that agents share the pool fairly. */
  sandbox: Pick<ScriptSandbox, 'run'>;
  /**
   * Runs chain `id` as a sub-chain (the `flow` node) and resolves with its result (every branch
   * end; `flow` merges them); rejects when it fails. `depth` and `path` (the chain ids from the
   * outermost run down to `id`) must be handed on: `(id, msg, depth, path) =>
   * runner.runById(load, id, msg, ctx, {depth, path})`.
   */
  runChain(id: string, msg: RuleMsg, depth: number, path: readonly string[]): Promise<SubChainResult>;
  /** One model completion (the `ai/llm` node); resolves with the answer's text. */
  complete(req: CompleteRequest): Promise<string>;
  /** Runs the agent tool loop for an `ai/agent` node (`node`: which one); resolves with the final answer's text. */
  runAgent(config: AiAgentConfig, msg: RuleMsg, node?: { id: string; type: string }): Promise<string>;
  /** Outbound-address policy of `restApiCall` (DESIGN section 5): public addresses only unless allowed here. */
  http?: AddressPolicy;
  /**
   * Who the run acts for and with what powers at this chain (`@agentry/definitions` `authority/policy.ts`): the runner
   * asks the policy about every node's capabilities with it. The engine's runs always set it; a
   * library caller without it (tests of a node) decides for itself.
   */
  authority?: RunAuthority;
  /**
   * Called by `runById` before a stored chain runs (a rule-chain tool, `flow`): refuses a chain
   * the caller may not use and answers the context it runs in (the caller's powers, narrowed).
   */
  enterChain?(chain: ParsedChain): Promise<ChainContext>;
}

/** A message that reached a join: from which node, and the error when it came along `Failure`. */
export interface BranchMsg {
  nodeId: string;
  msg: RuleMsg;
  err: string;
}

/** What a join node is given instead of one message (`NodeExecutor.join`). */
export interface JoinInput {
  /** The messages of the branches that reached the join, in arrival order. */
  msgs: readonly BranchMsg[];
  /** The join's timeout passed before every branch had ended. */
  timedOut: boolean;
}

/** What a node executor gets besides the message: the run's context plus where it runs. */
export interface NodeContext extends ChainContext {
  chain: ParsedChain;
  node: RuleNode;
  /** 0 for a top-level run, +1 per `flow` level. */
  depth: number;
  /** Chain ids from the outermost run down to this one. */
  path: readonly string[];
  maxFlowDepth: number;
  /**
   * Runs another node of this chain with `msg` and resolves with its outcome without following
   * its connections (RuleGo's TellNode, for `groupFilter`); a node that throws resolves with
   * `Failure`. Counts as a step and is traced.
   */
  runNode(nodeId: string, msg: RuleMsg): Promise<{ msg: RuleMsg; relations: readonly string[] }>;
  /** For a join node (`NodeExecutor.join`): the branch messages it merges. */
  joined?: JoinInput;
}

/**
 * A node's outcome: the message it passes on and the relation(s) to follow. No relation
 * (`relations: []`) ends the branch, as `end` does.
 */
export type NodeResult = { msg: RuleMsg; relation: string } | { msg: RuleMsg; relations: readonly string[] };

/**
 * A failure that carries the message to pass along the `Failure` relation (e.g. `restApiCall`
 * with the response of a non-2xx status). Any other thrown error passes the node's input on.
 */
export class NodeFailure extends Error {
  readonly msg: RuleMsg | undefined;
  constructor(message: string, msg?: RuleMsg, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NodeFailure';
    this.msg = msg;
  }
}

/**
 * What the runner calls for a node: `execute` of its node type (`src/nodes/`, registered in
 * `nodeTypes`); `config` is the node's configuration, already checked against the type's schema.
 */
export interface NodeExecutor {
  type: string;
  execute(msg: RuleMsg, config: Record<string, unknown>, ctx: NodeContext): Promise<NodeResult>;
  /** The powers its resolved configuration asks for (`NodeType.capabilities`). */
  capabilities?(config: Record<string, unknown>): Capability[];
  /** The branches this node starts run in parallel (`fork`) instead of one after the other. */
  parallel?: boolean;
  /**
   * This node merges branches (`join`): the runner collects the messages that reach it below
   * their common ancestor and runs it once, with `ctx.joined`, when every branch has ended or
   * after `timeoutMs(config)` (then `timedOut`).
   */
  join?: { timeoutMs(config: Record<string, unknown>): number };
}
