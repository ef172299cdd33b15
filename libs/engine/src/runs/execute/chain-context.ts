import { AppError } from '@agentry/errors';
import { assertAllowed, chainSharing, enter } from '@agentry/definitions';
import type { AiAgentConfig, ChainContext, ParsedChain, RuleMsg } from '../../chain/types.js';
import type { ModelCallRequest } from '../../models/types.js';
import type { AgentRun } from './deps.js';
import { loadChain } from './stored.js';

/** Runs an `ai/agent` node in `ctx` (the agent run at the chain the node belongs to). */
export type ChainAgentRunner = (ctx: AgentRun, config: AiAgentConfig, msg: RuleMsg, node?: { id: string; type: string }) => Promise<string>;

/**
 * The context a chain runs in: sub-chains through the same runner, `ai/llm` through the run's
 * providers, `ai/agent` through the caller's `runAgent` (whether it answers the client is the
 * caller's to decide).
 */
export function chainContext(ctx: AgentRun, runAgent: ChainAgentRunner): ChainContext {
  const { deps, run, signal } = ctx;
  const { runner, sandbox } = deps.chains;
  const chain: ChainContext = {
    logger: deps.logger,
    signal,
    // Keyed by the run's agent: the pool is shared fairly between agents, not between runs.
    sandbox: { run: (code, input, opts) => sandbox.run(code, input, { ...opts, key: run.agentId }) },
    runChain: (id, msg, depth, path) => runner.runById((cid) => loadChain(deps, cid), id, msg, chain, { depth, path }),
    complete: async (req) => {
      let text = '';
      for await (const ev of deps.stream({
        provider: req.provider,
        model: req.model,
        messages: req.messages,
        params: req.params as ModelCallRequest['params'],
        signal: req.signal,
      })) {
        if (ev.type === 'text') text += ev.text;
      }
      return text;
    },
    runAgent: (config, msg, node) => runAgent(ctx, config, msg, node),
    authority: ctx.authority,
    enterChain: async (entered) => chainContext(await enteredChain(ctx, entered), runAgent),
  };
  return chain;
}

/**
 * The agent run inside a stored chain another definition reached (a rule-chain tool, `flow`):
 * the caller's powers, narrowed to the chain owner's (or the owner's own when an admin lent them).
 */
async function enteredChain(ctx: AgentRun, chain: ParsedChain): Promise<AgentRun> {
  // A chain the engine loaded always has an owner; one without is refused rather than guessed.
  if (chain.owner === undefined) throw new AppError('FORBIDDEN', 403, `chain "${chain.id}" has no recorded owner`);
  const sharing = chainSharing(chain.dsl.ruleChain.configuration, ctx.authority.owner);
  // Another user's chain runs only when shared with this one, and its credentials only when lent.
  const created = chain.createdAt === undefined ? {} : { createdAt: chain.createdAt };
  const cap = { kind: 'reference', target: 'chain', id: chain.id, owner: chain.owner, ...sharing, secrets: chain.secrets === true, ...created } as const;
  assertAllowed(ctx.authority, cap, (m) => new AppError('FORBIDDEN', 403, m));
  const calls = ctx.limits.enter(ctx.calls, chain.id);
  return { ...ctx, calls, authority: await enter(ctx.deps.db, ctx.authority, chain.owner, sharing.lends, chain.savedAt) };
}
