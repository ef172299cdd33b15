import type { RunRequest } from '@agentry/contracts';
import { AppError } from '@agentry/errors';
import { recordRunSteps, type JsonValue } from '@agentry/db';
import type { AgentLoopResult } from '../../agent/loop.js';
import { parseChain } from '@agentry/definitions';
import { createRuleMsg } from '../../chain/message.js';
import { ChainError, type ChainTraceEntry } from '../../chain/runner.js';
import type { ChatMessage } from '../../models/types.js';
import type { ChainContext } from '../../chain/types.js';
import { chainContext } from './chain-context.js';
import { boundSteps } from './run-steps.js';
import type { AgentRun } from './deps.js';
import { runAgentWithTools, runSilentAgent } from './tool-agent.js';

/** What a run delivers: its output and the assistant/tool messages added to the session. */
export type Answer = Pick<AgentLoopResult, 'output' | 'added' | 'usage' | 'finishReason' | 'clientCalls'>;

/** The client's side of a run: the conversation it asked and where its answer goes. */
export interface ClientTurn {
  messages: ChatMessage[];
  request: RunRequest;
  /**
   * Commits the answer and sends `done`; false when the run had already ended elsewhere.
   * `answering`: the chain's ai/agent node that answered, still running (for the run's steps).
   */
  deliver(answer: Answer, answering?: ChainTraceEntry): Promise<boolean>;
}

/**
 * An agent whose chain has more than its `ai/agent` node: the chain runs with the user's last
 * message as `msg.data`. Nodes before the agent may filter or rewrite it; the first `ai/agent`
 * node to run streams the tool loop on the conversation with the (possibly rewritten) message in
 * place of the last user turn, and its answer is delivered at once (committed as the run's
 * output and the session's assistant message, then `done`): what the client saw is what is
 * stored. Nodes after it run for their side effects with the answer in `msg.data`; what they do
 * to `msg.data` changes nothing delivered, a later `ai/agent` node runs silently, and a failure
 * among them is a warning on the run, which stays succeeded. When no agent node answered (a
 * filter ended the chain), the chain's final `msg.data` is the answer, sent as one text event.
 * The chain's trace grows in `trace` (the run's steps, stored with its finish); when the answer
 * was delivered mid-chain, the whole trace is stored again once the chain has ended.
 */
export async function runAgentChain(ctx: AgentRun, dsl: JsonValue, client: ClientTurn, trace: ChainTraceEntry[]): Promise<void> {
  const { run } = ctx;
  const parsed = parseChain({ id: run.agentId, dsl, isAgent: true });
  if (!parsed.ok) throw new AppError('VALIDATION', 400, `agent "${run.agentId}" does not load: ${parsed.error}`);
  const lastUser = client.messages.map((m) => m.role).lastIndexOf('user');
  const answering = new AnsweringNode(ctx, client, lastUser);
  const input = createRuleMsg({ data: lastUser >= 0 ? client.messages[lastUser]!.content : '', metadata: { agentId: run.agentId, runId: run.id } });
  let final: string;
  try {
    final = (await ctx.deps.chains.runner.run(parsed.chain, input, answering.chain, { trace })).msg.data;
  } catch (err) {
    answering.afterChainFailed(err);
    await answering.recordSteps(trace);
    return;
  }
  await answering.recordSteps(trace);
  answering.rethrowDeliveryError();
  // Post-agent nodes' changes to msg.data do not change what was delivered.
  if (answering.answered) return;
  await ctx.emit({ type: 'text', text: final });
  await client.deliver({ output: final, added: [{ role: 'assistant', content: final }], usage: null, finishReason: 'stop' });
}

/**
 * The chain's `ai/agent` nodes: the first one to run answers the client and delivers, later
 * ones run silently. A delivery that fails, or finds the run ended elsewhere, stops the rest of
 * the chain (the failure then fails the run as usual).
 */
class AnsweringNode {
  answered = false;
  readonly chain: ChainContext;
  readonly #stop = new AbortController();
  #deliveryError: { err: unknown } | undefined;

  constructor(
    private readonly ctx: AgentRun,
    private readonly client: ClientTurn,
    private readonly lastUser: number,
  ) {
    const chainCtx: AgentRun = { ...ctx, signal: AbortSignal.any([ctx.signal, this.#stop.signal]), stack: [ctx.run.agentId] };
    this.chain = chainContext(chainCtx, async (inner, config, msg, node) => {
      if (this.answered) return runSilentAgent(inner, config, msg.data);
      const started = performance.now();
      const messages = client.messages.map((m, i) => (i === this.lastUser ? { ...m, content: msg.data } : m));
      const result = await runAgentWithTools(inner, { config, messages, request: client.request });
      this.answered = true;
      const entry = node ? { nodeId: node.id, type: node.type, relations: ['Success'], ms: performance.now() - started } : undefined;
      await this.#deliver(result, entry);
      return result.output;
    });
  }

  /** After a delivery mid-chain, the whole trace (with the nodes after the answer) replaces the steps stored then. */
  async recordSteps(trace: readonly ChainTraceEntry[]): Promise<void> {
    if (!this.answered || this.#deliveryError) return;
    try {
      await recordRunSteps(this.ctx.deps.db, this.ctx.run.id, boundSteps(trace));
    } catch (err) {
      this.ctx.log.warn({ err }, 'could not store the steps of the chain after its answer');
    }
  }

  async #deliver(result: Answer, entry: ChainTraceEntry | undefined): Promise<void> {
    try {
      if (!(await this.client.deliver(result, entry))) this.#stop.abort(new Error('the run ended elsewhere'));
    } catch (err) {
      this.#deliveryError = { err };
      this.#stop.abort(err);
    }
  }

  rethrowDeliveryError(): void {
    if (this.#deliveryError) throw this.#deliveryError.err;
  }

  /** A failure before the answer fails the run; one after it is only logged (the answer stands). */
  afterChainFailed(err: unknown): void {
    this.rethrowDeliveryError();
    if (!this.answered) throw err;
    if (this.#stop.signal.aborted) return;
    const where = err instanceof ChainError ? { chainId: err.chainId, nodeId: err.nodeId } : {};
    const detail = { ...where, err: err instanceof Error ? err.message : String(err) };
    if (this.ctx.signal.aborted) this.ctx.log.info(detail, 'the nodes after the ai/agent node were cancelled; the answer was already delivered');
    else this.ctx.log.warn(detail, 'a node after the ai/agent node failed; the answer was already delivered and the run stays succeeded');
  }
}
