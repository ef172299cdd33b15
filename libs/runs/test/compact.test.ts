import { afterAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createMemoryBus } from '@agentry/bus';
import { PubSubChannels, type CompactionOutcomeMessage, type QueuePayloads, type SessionCompactJob } from '@agentry/contracts';
import { requestCompaction } from '@agentry/runs';

/**
 * The gateway's side of a forced compaction: a `session-compact` job, and the wait for its
 * answer. The stand-in worker answers inside the enqueue, before it resolves: the fastest a
 * worker on another connection could be.
 */
describe('requestCompaction', () => {
  const logger = pino({ level: 'silent' });
  const bus = createMemoryBus({ logger });
  afterAll(() => bus.close());

  function workerAnswering(answer: CompactionOutcomeMessage | undefined) {
    const jobs: SessionCompactJob[] = [];
    const queue = {
      enqueue: async <Q extends keyof QueuePayloads>(_queue: Q, data: QueuePayloads[Q]) => {
        const job = data as SessionCompactJob;
        jobs.push(job);
        if (answer) await bus.pubsub.publish(PubSubChannels.compaction(job.requestId), answer);
        return job.requestId;
      },
    } as unknown as typeof bus.queue;
    return { deps: { bus: { queue, pubsub: bus.pubsub }, logger }, jobs };
  }

  it('listens before it enqueues, so the quickest answer is not lost; the job carries ids only', async () => {
    const { deps, jobs } = workerAnswering({ ok: true, compacted: 3, summary: 'S' });
    expect(await requestCompaction(deps, { sessionId: 's1', principal: 'user:carol' }, 5000)).toEqual({ compacted: 3, summary: 'S' });
    expect(jobs).toEqual([{ type: 'session-compact', v: 1, sessionId: 's1', principal: 'user:carol', requestId: expect.any(String) }]);
    expect(await bus.pubsub.listeners([PubSubChannels.compaction(jobs[0]!.requestId)])).toEqual([0]);
  });

  it("rethrows the worker's error as the same error: code, status and message", async () => {
    const message = 'Too many requests: the tokensPerDay budget of user:carol (10 tokens per day) is spent';
    const { deps } = workerAnswering({ ok: false, code: 'RATE_LIMITED', message });
    await expect(requestCompaction(deps, { sessionId: 's1', principal: 'user:carol' }, 5000)).rejects.toMatchObject({ code: 'RATE_LIMITED', status: 429, message });
  });

  it('gives up after the wait with a 503 a person can read, and stops listening', async () => {
    const { deps, jobs } = workerAnswering(undefined);
    await expect(requestCompaction(deps, { sessionId: 's1', principal: '' }, 50)).rejects.toMatchObject({
      code: 'NOT_READY',
      status: 503,
      message: 'Service not ready: no agent worker compacted the session within 50 ms; try again later',
    });
    expect(await bus.pubsub.listeners([PubSubChannels.compaction(jobs[0]!.requestId)])).toEqual([0]);
  });
});
