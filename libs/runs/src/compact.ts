import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, Errors } from '@agentry/errors';
import { PubSubChannels, QueueNames, type CompactionOutcomeMessage, type SessionCompactJob } from '@agentry/contracts';
import type { Bus } from '@agentry/bus';

export interface CompactionRequest {
  sessionId: string;
  /** Who asked: the summary call is reserved on their budget and recorded under them. */
  principal: string;
}

/**
 * Forced compaction as the gateway asks for it: a `session-compact` job for an agent worker
 * (the one process with a model client), answered on `compaction:<requestId>`. The reply
 * channel is subscribed before the job is enqueued, so a fast worker cannot answer into the
 * void; a worker that does not answer within `waitMs` (`worker.max_run_ms`) is the caller's
 * 503. The worker's error comes back as the same error (code, status, message).
 */
export async function requestCompaction(
  deps: { bus: Pick<Bus, 'queue' | 'pubsub'>; logger: Logger },
  req: CompactionRequest,
  waitMs: number,
): Promise<{ compacted: number; summary: string | null }> {
  const requestId = randomUUID();
  let answer!: (outcome: CompactionOutcomeMessage) => void;
  const answered = new Promise<CompactionOutcomeMessage>((resolve) => (answer = resolve));
  const unsubscribe = await deps.bus.pubsub.subscribe(PubSubChannels.compaction(requestId), (outcome) => answer(outcome));
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const job: SessionCompactJob = { type: 'session-compact', v: 1, sessionId: req.sessionId, principal: req.principal, requestId };
    // One try: a retry after the caller's answer would compact behind its back.
    await deps.bus.queue.enqueue(QueueNames.agentRun, job, { jobId: `compact:${requestId}`, attempts: 1 });
    const timedOut = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs)));
    const outcome = await Promise.race([answered, timedOut]);
    if (!outcome) {
      deps.logger.warn({ sessionId: req.sessionId, requestId, waitMs }, 'forced compaction: no worker answered in time');
      const waited = waitMs >= 1000 ? `${Math.round(waitMs / 1000)} s` : `${waitMs} ms`;
      throw new Errors.NOT_READY(`no agent worker compacted the session within ${waited}; try again later`);
    }
    if (!outcome.ok) throw new AppError(outcome.code, Errors[outcome.code].status, outcome.message);
    return { compacted: outcome.compacted, summary: outcome.summary };
  } finally {
    clearTimeout(timer);
    await unsubscribe();
  }
}
