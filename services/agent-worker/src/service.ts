import type { Runtime } from '@agentry/runtime';

/**
 * Runs agents: consumes the `agent-run` queue, executes rule chains and the LLM tool loop, publishes run events. The consumer arrives with the chat pipeline; until then the worker connects, reports ready and stops cleanly.
 */
export async function startAgentWorker(runtime: Runtime): Promise<void> {
  runtime.lifecycle.add('agent-worker', async () => {
    runtime.logger.info('agent-worker stopped');
  });
  runtime.logger.info({ bus: runtime.bus.kind, database: runtime.db.dialect }, 'agent-worker started');
}
