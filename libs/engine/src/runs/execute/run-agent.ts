import { Compile } from 'typebox/compile';
import { RunRequest } from '@agentry/contracts';
import { AppError } from '@agentry/errors';
import type { RuleChainRow, RunRecord } from '@agentry/db';
import { type AiAgentConfig, timeOf } from '@agentry/definitions';
import type { LoopEvent } from '../../agent/loop.js';
import type { ChainTraceEntry } from '../../chain/runner.js';
import { runAgentChain, type ClientTurn } from './chain-run.js';
import { agentNode, buildConversation, nodesOf } from './conversation.js';
import type { AgentRun, RunDeps } from './deps.js';
import { deliverAnswer, endCancelled, endFailed } from './outcome.js';
import { RunProgress } from './progress.js';
import { RunLimits } from './run-limits.js';
import { sessionConversation } from './session-context.js';
import { readAgent } from './stored.js';
import { assertAgentEnabled } from '@agentry/runs';
import { agentInstructions } from './system-prompt.js';
import { runAgentWithTools } from './tool-agent.js';

/**
 * Runs one claimed run to its end: publishes its events in order (seq from 0), and commits the
 * outcome. A completed turn is appended to the session in the same transaction that marks the
 * run succeeded, and `done` is published only after that commit, so the next turn of the
 * session sees it. A failed or cancelled run leaves its turn in the session marked `failed` or
 * `stopped`, which the model's history never reads.
 */
export async function runAgent(outer: RunDeps, run: RunRecord, signal: AbortSignal): Promise<void> {
  const limits = new RunLimits(outer.bounds(), signal);
  // Every model call of the run (agents, sub-agents, ai/llm nodes) counts against its bound.
  const deps: RunDeps = { ...outer, stream: (req) => (limits.modelCall(), outer.stream(req)) };
  const progress = new RunProgress(deps, run);
  // No powers until the agent's owner is known (prepare reads the row).
  const unknownOwner = { principal: run.principal, agentOwner: '', owner: '', admin: false };
  const base = { deps, run, log: progress.log, emit: (ev: LoopEvent) => progress.onLoopEvent(ev), stack: [run.agentId], calls: [run.agentId], limits, note: (entry: ChainTraceEntry) => progress.note(entry) };
  let ctx: AgentRun = { ...base, signal: limits.signal, authority: unknownOwner };
  progress.started();
  try {
    const { agent, config, client } = await prepare(ctx, progress);
    const savedAt = timeOf(agent.updatedAt);
    ctx = { ...ctx, authority: { ...unknownOwner, agentOwner: agent.owner, owner: agent.owner, admin: await deps.ownerIsAdmin(agent.owner), ...(savedAt === undefined ? {} : { savedAt }) } };
    if (nodesOf(agent.dsl).length > 1) await runAgentChain(ctx, agent.dsl, client, (progress.chainTrace = []));
    else await client.deliver(await runAgentWithTools(ctx, { config, messages: client.messages, request: client.request }));
  } catch (err) {
    // A passed bound fails the run with its own words, whatever error its nested calls ended with.
    if (signal.aborted) await endCancelled(ctx, progress);
    else await endFailed(ctx, progress, limits.exceeded ?? err);
  } finally {
    limits.close();
  }
}

/** Compiled once: Value.Check walks the schema on every call (~3 % of a worker's CPU per run). */
const runRequest = Compile(RunRequest);

/** The run's agent, its configuration and what the client asked, with the session's history. */
async function prepare(ctx: AgentRun, progress: RunProgress): Promise<{ agent: RuleChainRow; config: AiAgentConfig; client: ClientTurn }> {
  const { deps, run } = ctx;
  if (!runRequest.Check(run.request)) throw new AppError('VALIDATION', 400, 'the stored run request is malformed');
  const request = run.request as RunRequest;
  const agent = await readAgent(deps, run.agentId);
  if (!agent || agent.kind !== 'agent') throw new AppError('NOT_FOUND', 404, `Not found: agent "${run.agentId}"`);
  // Runs queued before the agent was switched off are refused here, with the words chat gets.
  assertAgentEnabled(agent);
  const config = agentNode(agent.dsl);
  if (!config) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" has no ai/agent node`);
  // The instructions load while the session's context does (skills and history are independent).
  const instructions = agentInstructions(deps, config, run.agentId);
  const { messages, newTurns } = run.sessionId
    ? await sessionConversation(ctx, config, instructions, request, run.sessionId)
    : buildConversation(await instructions, request, null);
  const deliver: ClientTurn['deliver'] = (answer, answering) => deliverAnswer(ctx, progress, { request, newTurns }, answer, answering);
  return { agent, config, client: { messages, request, deliver } };
}
