import type { Logger } from 'pino';
import { insertRunUsage, insertRunUsages, type Db, type RunRecord, type RunUsageInput, type UsageKind } from '@agentry/db';
import { type ModelEvent } from '@agentry/engine';

/** The run a model call belongs to, as usage needs it. */
export type UsageRun = Pick<RunRecord, 'id' | 'agentId' | 'principal'>;

export interface UsageRecorder {
  /** Records a finished model call's usage; never throws and never waits (the run goes on). */
  record(run: UsageRun, done: Extract<ModelEvent, { type: 'done' }>, kind?: UsageKind): void;
  /** Waits for the writes still under way (the worker's shutdown, before the database closes). */
  drain(): Promise<void>;
}

/** Usage rows wait at most this long to be written with others (one INSERT, one commit for many runs). */
const FLUSH_MS = 25;
/** ... or until this many are waiting. */
const MAX_BATCH = 200;

/**
 * Per model call: one `run_usage` row (the principal's day counter, the budget the gateways
 * check, is the model call's reservation's to settle: TokenBudgets). Written off the run's path:
 * a failed write is logged and the run goes on, as a lost metric would. Rows are gathered for up
 * to 25 ms and written by one INSERT (under load one commit serves many runs instead of one
 * each); a batch that fails is written row by row, so that one bad row (its run deleted
 * meanwhile) loses only itself.
 */
export function usageRecorder(deps: { db: Db; logger: Logger }): UsageRecorder {
  const pending = new Set<Promise<void>>();
  const track = (work: Promise<unknown>, what: string, runIds: string[]) => {
    const p = work.then(
      () => undefined,
      (err: unknown) => deps.logger.warn({ err, runIds }, `${what} not recorded`),
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  let batch: RunUsageInput[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    const rows = batch;
    batch = [];
    if (rows.length === 0) return;
    const write = insertRunUsages(deps.db, rows).catch(async (err: unknown) => {
      if (rows.length === 1) throw err;
      for (const row of rows) track(insertRunUsage(deps.db, row), 'model call usage', [row.runId]);
    });
    track(write, 'model call usage', rows.map((r) => r.runId));
  };
  return {
    record(run, done, kind = 'chat') {
      const promptTokens = Math.max(0, done.usage?.promptTokens ?? 0) || 0;
      const completionTokens = Math.max(0, done.usage?.completionTokens ?? 0) || 0;
      batch.push({ runId: run.id, agentId: run.agentId, principal: run.principal, provider: done.provider, model: done.model, promptTokens, completionTokens, kind });
      if (batch.length >= MAX_BATCH) flush();
      else timer ??= setTimeout(flush, FLUSH_MS);
    },
    async drain() {
      flush();
      // A failed batch adds its rows one by one while it is awaited: wait until nothing is left.
      while (pending.size > 0) await Promise.all([...pending]);
    },
  };
}
