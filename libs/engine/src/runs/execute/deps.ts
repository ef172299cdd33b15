import type { Logger } from 'pino';
import type { InvalidateMessage, RunEvent, RunReply } from '@agentry/contracts';
import type { Db, FinalRunStatus, RuleChainRow, RunRecord, RunSource, SkillRow } from '@agentry/db';
import type { LoopEvent } from '../../agent/loop.js';
import { type RunAuthority, type SecretSealer } from '@agentry/definitions';
import type { CompactionSettings, ModelInfo } from '../../compaction/compaction.js';
import type { ChainRunner, ChainTraceEntry } from '../../chain/runner.js';
import type { ModelCallRequest, ModelEvent } from '../../models/types.js';
import type { ScriptSandbox } from '../../sandbox/sandbox.js';
import type { ToolContext, ToolDefinition } from '../../tools/types.js';
import type { RunBounds, RunLimits } from './run-limits.js';

/**
 * What running one agent needs. Every hook is required: the worker wires all of them, and a test
 * passes fakes (`libs/engine/test/fake-run-deps.ts`), so the engine never guesses what is missing.
 */
export interface RunDeps {
  db: Db;
  logger: Logger;
  /** Streams a model call (the provider client). */
  stream(req: ModelCallRequest): AsyncIterable<ModelEvent>;
  /** Publishes one event of the run, in order. */
  publish(event: RunEvent): Promise<void>;
  /** An agent's row, secrets still sealed (the worker passes its cache). */
  agent(agentId: string): Promise<RuleChainRow | undefined>;
  /**
   * Whether an agent's owner holds admin powers (`ownerIsAdmin`: its user row), for the run's
   * authority; read before every run's model call (the worker passes its cache).
   */
  ownerIsAdmin(owner: string): Promise<boolean>;
  /** An agent's and the global skills, every status, for its system prompt (the worker passes its SkillsCache). */
  loadSkills(agentId: string): Promise<SkillRow[] | undefined>;
  /** Opens the secrets sealed inside definitions (the gateway seals them with the same key). */
  secrets: SecretSealer;
  /** History window of a session. */
  maxMessages: number;
  /** `agents.defaults.session.compaction`, read at each run (an agent's own fields override it). */
  compaction(): CompactionSettings;
  /** The model a provider and model name resolve to, with its `context_window` (undefined: unknown provider or model). */
  modelInfo(req: { provider?: string; model?: string }): Promise<ModelInfo | undefined>;
  /** `workspace.max_file_bytes`: the workspace tools write no larger file (as the workspace routes). */
  maxFileBytes: number;
  /** `security.allowUnsandboxedBash`, read at each run (it may change live). */
  allowUnsandboxedBash(): boolean;
  /**
   * `security.quotas.workspaceBytesPerAgent` for this agent: the most bytes of files its
   * workspace may hold when a plain user owns it; undefined: no limit (an admin's agent, an open server).
   */
  workspaceByteLimit(agentId: string): Promise<number | undefined>;
  /** `worker.max_call_depth`, `max_run_ms`, `max_model_calls_per_run`, `max_tool_calls_per_run`, `max_tool_timeout_ms`, read when a run starts. */
  bounds(): RunBounds;
  /** Built-in tools by name. */
  builtin: Record<string, ToolDefinition>;
  /** Runs rule chains (agents with more than their `ai/agent` node, rule-chain tools). */
  chains: { runner: ChainRunner; sandbox: Pick<ScriptSandbox, 'run'> };
  /** Publishes on `invalidate` (the bus's pub/sub): tools that change cached state announce it. */
  publishInvalidate(message: InvalidateMessage): Promise<void>;
  /** Sends through a channel and waits for the platform (the `send_message` tool). */
  sendMessage: NonNullable<ToolContext['sendMessage']>;
  /** The answers of runs that came from a channel, and the notice of those that failed. */
  replies: RunReplies;
  /** Where run counts and latencies go. */
  metrics: RunMetrics;
  /** Called once the answer is committed and `done` published (nodes after the ai/agent node may still run). */
  delivered(): void;
}

/**
 * The way back to a chat. The engine decides what is sent and when; the outbox (rows, jobs, the
 * connector) is the channels library's, so the worker hands it in.
 */
export interface RunReplies {
  /** Writes the outbound row inside the transaction that ends the run; its id, or undefined when nothing is to be sent. */
  queue(tx: Db, runId: string, reply: RunReply, text: string): Promise<string | undefined>;
  /** Enqueues the row's send job after the commit; never throws (the connector's sweep covers a lost job). */
  enqueue(outboundId: string | undefined, logger: Logger): Promise<void>;
}

/** Counts and timings of ended runs (the worker's registry turns them into metrics). */
export interface RunMetrics {
  runEnded(ended: { status: FinalRunStatus; source: RunSource; durationMs: number; ttftMs?: number }): void;
}

/**
 * One agent executing inside a run. The answering agent, a sub-agent and a silent `ai/agent`
 * node differ only in these fields, so each derives its own from its caller's rather than taking
 * them as separate parameters.
 */
export interface AgentRun {
  deps: RunDeps;
  run: RunRecord;
  /** The run's logger (run, agent and session bound). */
  log: Logger;
  signal: AbortSignal;
  /** Where the tool loop's events go: the client for the answering agent, nowhere for the others. */
  emit(event: LoopEvent): Promise<void>;
  /** Agent ids from the run's agent down to the one executing (cycles and depth are checked on it). */
  stack: readonly string[];
  /** Who asked, whose agent runs, and the powers in effect at the definition executing (`@agentry/definitions` `authority/policy.ts`). */
  authority: RunAuthority;
  /** What the whole run may still spend (model calls, tool calls, time), shared by everything nested in it. */
  limits: RunLimits;
  /** Chain and agent ids entered from the run's agent down to the one executing: one depth bound and cycle check for chain tools, `flow` and sub-agents. */
  calls: readonly string[];
  /** Adds an entry to the run's steps (a tool the policy left out), whether or not the agent runs as a chain. */
  note(entry: ChainTraceEntry): void;
}

/** A silent agent's events go nowhere: its answer is its caller's result, not the client's. */
export function silent(ctx: AgentRun, changes: Partial<Pick<AgentRun, 'signal' | 'stack' | 'authority' | 'calls'>> = {}): AgentRun {
  return { ...ctx, ...changes, emit: async () => {} };
}
