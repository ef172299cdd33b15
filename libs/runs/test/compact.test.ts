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

  /** Publishes `messages` on the job's channel, each after its delay (ms from the enqueue; 0: inside it). */
  function workerAnswering(...messages: Array<CompactionOutcomeMessage | [number, CompactionOutcomeMessage]>) {
    const jobs: SessionCompactJob[] = [];
    const queue = {
      enqueue: async <Q extends keyof QueuePayloads>(_queue: Q, data: QueuePayloads[Q]) => {
        const job = data as SessionCompactJob;
        jobs.push(job);
        const channel = PubSubChannels.compaction(job.requestId);
        for (const m of messages) {
          if (!Array.isArray(m)) await bus.pubsub.publish(channel, m);
          else setTimeout(() => void bus.pubsub.publish(channel, m[1]), m[0]);
        }
        return job.requestId;
      },
    } as unknown as typeof bus.queue;
    return { deps: { bus: { queue, pubsub: bus.pubsub }, logger }, jobs };
  }

  it('listens before it enqueues, so the quickest answer is not lost; the job carries ids only', async () => {
    const { deps, jobs } = workerAnswering({ ok: true, compacted: 3, summary: 'S' });
    expect(await requestCompaction(deps, { sessionId: 's1', principal: 'user:carol' }, { waitMs: 5000 })).toEqual({ compacted: 3, summary: 'S' });
    expect(jobs).toEqual([{ type: 'session-compact', v: 1, sessionId: 's1', principal: 'user:carol', requestId: expect.any(String) }]);
    expect(await bus.pubsub.listeners([PubSubChannels.compaction(jobs[0]!.requestId)])).toEqual([0]);
  });

  it("rethrows the worker's error as the same error: code, status and message", async () => {
    const message = 'Too many requests: the tokensPerDay budget of user:carol (10 tokens per day) is spent';
    const { deps } = workerAnswering({ ok: false, code: 'RATE_LIMITED', message });
    await expect(requestCompaction(deps, { sessionId: 's1', principal: 'user:carol' }, { waitMs: 5000 })).rejects.toMatchObject({ code: 'RATE_LIMITED', status: 429, message });
  });

  it('gives up after the wait with a 503 a person can read, and stops listening', async () => {
    const { deps, jobs } = workerAnswering([20, { started: true }]);
    await expect(requestCompaction(deps, { sessionId: 's1', principal: '' }, { waitMs: 150, pickupMs: 100 })).rejects.toMatchObject({
      code: 'NOT_READY',
      status: 503,
      message: 'Service not ready: no agent worker compacted the session within 150 ms; try again later',
    });
    expect(await bus.pubsub.listeners([PubSubChannels.compaction(jobs[0]!.requestId)])).toEqual([0]);
  });

  it('tells at its pickup bound, not after the whole wait, that no worker took the job', async () => {
    const { deps, jobs } = workerAnswering();
    await expect(requestCompaction(deps, { sessionId: 's1', principal: '' }, { waitMs: 60_000, pickupMs: 50 })).rejects.toMatchObject({
      code: 'NOT_READY',
      status: 503,
      message: 'Service not ready: no agent worker was free to compact the session within 50 ms; try again later',
    });
    // A worker that takes the job later sees nobody listening and skips it.
    expect(await bus.pubsub.listeners([PubSubChannels.compaction(jobs[0]!.requestId)])).toEqual([0]);
  });

  it('once a worker took the job, waits past the pickup bound for its answer', async () => {
    const { deps } = workerAnswering([10, { started: true }], [150, { ok: true, compacted: 2, summary: 'late' }]);
    expect(await requestCompaction(deps, { sessionId: 's1', principal: '' }, { waitMs: 5000, pickupMs: 50 })).toEqual({ compacted: 2, summary: 'late' });
  });
});
