import type { Logger } from 'pino';
import { budgetCounter } from '@agentry/contracts';
import { insertRunUsage, type Db, type RunRecord } from '@agentry/db';
import type { Bus } from '@agentry/bus';
import type { ModelEvent } from '@agentry/engine';

/** The run a model call belongs to, as usage needs it. */
export type UsageRun = Pick<RunRecord, 'id' | 'agentId' | 'principal'>;

export interface UsageRecorder {
  /** Records a finished model call's usage; never throws and never waits (the run goes on). */
  record(run: UsageRun, done: Extract<ModelEvent, { type: 'done' }>): void;
  /** Waits for the writes still under way (the worker's shutdown, before the database closes). */
  drain(): Promise<void>;
}

/**
 * Per model call: one `run_usage` row, and the tokens added to the principal's day counter
 * (the budget the gateways check; no principal, no budget). Written off the run's path: a
 * failed write is logged and the run goes on, as a lost metric would.
 */
export function usageRecorder(deps: { db: Db; bus: Pick<Bus, 'count'>; logger: Logger }): UsageRecorder {
  const pending = new Set<Promise<void>>();
  const track = (work: Promise<unknown>, what: string, run: UsageRun) => {
    const p = work.then(
      () => undefined,
      (err: unknown) => deps.logger.warn({ err, runId: run.id }, `${what} not recorded`),
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  return {
    record(run, done) {
      const promptTokens = Math.max(0, done.usage?.promptTokens ?? 0) || 0;
      const completionTokens = Math.max(0, done.usage?.completionTokens ?? 0) || 0;
      track(
        insertRunUsage(deps.db, { runId: run.id, agentId: run.agentId, principal: run.principal, provider: done.provider, model: done.model, promptTokens, completionTokens }),
        'model call usage',
        run,
      );
      if (run.principal && promptTokens + completionTokens > 0) {
        const day = budgetCounter('tokensPerDay', run.principal);
        track(deps.bus.count(day.key, promptTokens + completionTokens, day.ttlMs), "tokens of the principal's budget", run);
      }
    },
    async drain() {
      await Promise.all([...pending]);
    },
  };
}
