import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRunJob } from '@agentry/contracts';
import { getRun, insertRuleChain, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { LocalClaims, submitRun } from '@agentry/runs';

/**
 * A chat run's insert claims it for the worker of its own process (embedded mode) only while that
 * worker has a free run slot, only outside a session, and hands the claimed row over only once
 * its job is being enqueued: every other way out leaves nothing behind.
 */
describe('submitRun with claimHere (LocalClaims)', () => {
  let handle: DbHandle;
  const enqueued: string[] = [];
  let refuse = false;
  const queue = {
    enqueue: async (_queue: string, data: AgentRunJob) => {
      if (refuse) throw new Error('the queue is away');
      enqueued.push(data.runId);
      return data.runId;
    },
  };
  const claims = LocalClaims.of(queue);
  let free = 0;
  const request = { messages: [{ role: 'user' as const, content: 'hi' }] };
  const submit = (runId: string, extra: Partial<Parameters<typeof submitRun>[1]> = {}) =>
    submitRun({ db: handle.db, queue }, { agentId: 'a', source: 'api', request, runId, claimHere: true, ...extra });

  beforeAll(async () => {
    handle = await createTestPglite();
    await insertRuleChain(handle.db, { id: 'a', kind: 'agent', agentId: null, name: 'a', category: null, dsl: {} });
  });
  afterAll(async () => {
    await handle?.close();
  });

  it('without a worker serving the queue in this process, the run is inserted queued', async () => {
    await submit('no-worker');
    expect(await getRun(handle.db, 'no-worker')).toMatchObject({ status: 'queued', attempts: 0, startedAt: null });
    expect(claims.take('no-worker')).toBeUndefined();
  });

  it('with a free slot, the run is inserted running (attempt 1, started) and the inserted row handed to the worker', async () => {
    const stop = claims.serve(() => free);
    try {
      free = 1;
      const { run } = await submit('claimed');
      expect(await getRun(handle.db, 'claimed')).toMatchObject({ status: 'running', attempts: 1, startedAt: expect.any(Date) });
      expect(enqueued).toContain('claimed');
      // Its slot is spoken for until its job takes it: the next run goes in queued.
      expect(claims.hasRoom()).toBe(false);
      await submit('behind-it');
      expect(await getRun(handle.db, 'behind-it')).toMatchObject({ status: 'queued', attempts: 0 });
      expect(claims.take('claimed')).toBe(run);
      expect(claims.take('claimed')).toBeUndefined();
    } finally {
      stop();
    }
    free = 1;
    await submit('stopped-serving');
    expect(await getRun(handle.db, 'stopped-serving')).toMatchObject({ status: 'queued' });
  });

  it("a session's run, and one with rows of its own (withRun), are inserted queued: a turn is claimed at its turn", async () => {
    const stop = claims.serve(() => 5);
    try {
      const { run } = await submit('in-session', { session: { key: 'k', channel: 'api' } });
      expect(run).toMatchObject({ status: 'queued', attempts: 0 });
      await submit('with-rows', { withRun: async () => {} });
      expect(await getRun(handle.db, 'with-rows')).toMatchObject({ status: 'queued' });
      expect(claims.size).toBe(0);
    } finally {
      stop();
    }
  });

  it('a run whose client left, or whose job the queue refused, is ended and nothing is left handed', async () => {
    const stop = claims.serve(() => 5);
    try {
      const left = new AbortController();
      left.abort();
      expect(await submit('client-left', { signal: left.signal })).toMatchObject({ cancelled: true });
      expect(await getRun(handle.db, 'client-left')).toMatchObject({ status: 'cancelled' });
      refuse = true;
      await expect(submit('refused')).rejects.toThrow(/run queue is unavailable/);
      expect(await getRun(handle.db, 'refused')).toMatchObject({ status: 'failed', error: 'could not enqueue the run' });
      expect(claims.size).toBe(0);
    } finally {
      refuse = false;
      stop();
    }
  });
});
