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
 * How long a forced compaction waits for a worker to take its job. Every worker busy at its
 * concurrency, or none running, is told in seconds rather than after `worker.max_run_ms`; the
 * job nobody waits for any more is then skipped by the worker that finally takes it.
 */
export const COMPACTION_PICKUP_MS = 30_000;

/**
 * Forced compaction as the gateway asks for it: a `session-compact` job for an agent worker
 * (the one process with a model client), answered on `compaction:<requestId>`. The reply
 * channel is subscribed before the job is enqueued, so a fast worker cannot answer into the
 * void. A worker says `started` when it takes the job: without it within `pickupMs` the caller
 * gets a 503 at once; after it, the wait for the answer is `waitMs` (`worker.max_run_ms`). The
 * worker's error comes back as the same error (code, status, message).
 */
export async function requestCompaction(
  deps: { bus: Pick<Bus, 'queue' | 'pubsub'>; logger: Logger },
  req: CompactionRequest,
  bounds: { waitMs: number; pickupMs?: number },
): Promise<{ compacted: number; summary: string | null }> {
  const requestId = randomUUID();
  const { waitMs } = bounds;
  const pickupMs = Math.min(bounds.pickupMs ?? COMPACTION_PICKUP_MS, waitMs);
  let answer!: (outcome: CompactionOutcomeMessage | 'pickup' | 'wait') => void;
  const answered = new Promise<CompactionOutcomeMessage | 'pickup' | 'wait'>((resolve) => (answer = resolve));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const unsubscribe = await deps.bus.pubsub.subscribe(PubSubChannels.compaction(requestId), (message) => {
    if (!('started' in message)) return answer(message);
    // Taken: from now on the summary call's own bound applies.
    clearTimeout(timer);
    timer = setTimeout(() => answer('wait'), waitMs);
  });
  try {
    const job: SessionCompactJob = { type: 'session-compact', v: 1, sessionId: req.sessionId, principal: req.principal, requestId };
    timer = setTimeout(() => answer('pickup'), pickupMs);
    // One try: a retry after the caller's answer would compact behind its back.
    await deps.bus.queue.enqueue(QueueNames.agentRun, job, { jobId: `compact-${requestId}`, attempts: 1 });
    const outcome = await answered;
    if (outcome === 'pickup') {
      deps.logger.warn({ sessionId: req.sessionId, requestId, pickupMs }, 'forced compaction: no worker took the job in time');
      throw new Errors.NOT_READY(`no agent worker was free to compact the session within ${duration(pickupMs)}; try again later`);
    }
    if (outcome === 'wait') {
      deps.logger.warn({ sessionId: req.sessionId, requestId, waitMs }, 'forced compaction: no worker answered in time');
      throw new Errors.NOT_READY(`no agent worker compacted the session within ${duration(waitMs)}; try again later`);
    }
    if ('started' in outcome) throw new Error('unreachable: started is not an outcome');
    if (!outcome.ok) throw new AppError(outcome.code, Errors[outcome.code].status, outcome.message);
    return { compacted: outcome.compacted, summary: outcome.summary };
  } finally {
    clearTimeout(timer);
    await unsubscribe();
  }
}

function duration(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
}
