import type { Logger } from 'pino';
import { Compile } from 'typebox/compile';
import { PubSubChannels, SessionCompactJob, isCompactionErrorCode, type CompactionOutcomeMessage } from '@agentry/contracts';
import { UnrecoverableJobError, type Bus, type Job } from '@agentry/bus';
import { isAppError } from '@agentry/errors';
import { getRuleChain, getSession, type Db } from '@agentry/db';
import { agentNode, compactionSettings, compactSessionNow, type ModelCallRequest, type ModelEvent, type ModelInfo } from '@agentry/engine';
import type { UsageRun } from './usage.js';

export interface CompactJobContext {
  db: Db;
  bus: Pick<Bus, 'pubsub'>;
  logger: Logger;
  /** The worker's one model client, metered: budget reservation, token counts, `run_usage`. */
  stream: (req: ModelCallRequest, run: UsageRun) => AsyncIterable<ModelEvent>;
  modelInfo: (req: { provider?: string; model?: string }) => Promise<ModelInfo | undefined>;
  /** Waits for the usage rows still being written: the caller may read its usage once answered. */
  drainUsage: () => Promise<void>;
  /** Read per job (configuration is live). */
  settings: () => { compaction: Parameters<typeof compactionSettings>[0]; maxMessages: number; maxRunMs: number };
}

/** Compiled once: Value.Check walks the schema on every call. */
const sessionCompactJob = Compile(SessionCompactJob);

/**
 * The `session-compact` job (`POST /sessions/{id}/compact`): summarises the session with this
 * worker's model client, the summary call reserved on the caller's budget and recorded as
 * usage kind `compaction` under the caller with run id `compaction:<session id>`, and publishes
 * the outcome (or the error the caller gets) on `compaction:<requestId>`. A job nobody waits
 * for any more (the gateway gave up: its client got a 503) is skipped, not done behind its back.
 */
export function compactJobHandler(ctx: CompactJobContext): (job: Job<unknown>, shutdownSignal: AbortSignal) => Promise<void> {
  return async (job, shutdownSignal) => {
    if (!sessionCompactJob.Check(job.data)) {
      ctx.logger.warn({ jobId: job.id, job: job.data }, 'session-compact job of an unknown version or shape: dropped');
      throw new UnrecoverableJobError(`malformed session-compact payload: ${JSON.stringify(job.data)}`);
    }
    const { sessionId, principal, requestId } = job.data;
    const channel = PubSubChannels.compaction(requestId);
    const [listeners] = await ctx.bus.pubsub.listeners([channel]);
    if (!listeners) {
      ctx.logger.info({ sessionId, requestId }, 'forced compaction: nobody waits for it any more (the request timed out); skipped');
      return;
    }
    // The gateway waits `worker.max_run_ms` from here, not only until its pickup bound.
    await ctx.bus.pubsub.publish(channel, { started: true });
    const outcome = await compactionOutcome(ctx, { sessionId, principal }, shutdownSignal);
    await ctx.bus.pubsub.publish(channel, outcome);
  };
}

async function compactionOutcome(ctx: CompactJobContext, req: { sessionId: string; principal: string }, shutdownSignal: AbortSignal): Promise<Exclude<CompactionOutcomeMessage, { started: true }>> {
  try {
    const session = await getSession(ctx.db, req.sessionId);
    // Deleted since the gateway checked it.
    if (!session) return { ok: false, code: 'NOT_FOUND', message: `Not found: session "${req.sessionId}"` };
    const agent = await getRuleChain(ctx.db, session.agentId);
    const config = agent?.kind === 'agent' ? agentNode(agent.dsl) : undefined;
    if (!config) return { ok: false, code: 'VALIDATION', message: `Invalid input: agent "${session.agentId}" of the session has no ai/agent node to summarise with` };
    const settings = ctx.settings();
    const usageRun: UsageRun = { id: `compaction:${session.id}`, agentId: session.agentId, principal: req.principal };
    const result = await compactSessionNow(
      { db: ctx.db, logger: ctx.logger, stream: (r) => ctx.stream(r, usageRun) },
      {
        sessionId: session.id,
        config,
        settings: compactionSettings(settings.compaction, config.compaction),
        info: await ctx.modelInfo({ provider: config.provider, model: config.model }),
        limit: settings.maxMessages,
        // The provider's timeouts bound the call; past the time the gateway waits nobody would read the answer.
        signal: AbortSignal.any([shutdownSignal, AbortSignal.timeout(settings.maxRunMs)]),
      },
    );
    await ctx.drainUsage();
    return { ok: true, ...result };
  } catch (err) {
    if (isAppError(err) && isCompactionErrorCode(err.code)) return { ok: false, code: err.code, message: err.message };
    ctx.logger.error({ err, sessionId: req.sessionId }, 'forced compaction failed');
    return { ok: false, code: 'INTERNAL', message: 'Internal server error: the compaction failed on the worker (see its log)' };
  }
}
