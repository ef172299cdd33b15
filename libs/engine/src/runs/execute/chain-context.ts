import type { ChainContext } from '../../chain/types.js';
import type { ModelCallRequest } from '../../models/types.js';
import type { AgentRun } from './deps.js';
import { loadChain } from './stored.js';

/**
 * The context a chain runs in: sub-chains through the same runner, `ai/llm` through the run's
 * providers, `ai/agent` through the caller's `runAgent` (whether it answers the client is the
 * caller's to decide).
 */
export function chainContext(ctx: AgentRun, runAgent: ChainContext['runAgent']): ChainContext {
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
    runAgent,
  };
  return chain;
}
