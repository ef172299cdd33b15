import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PubSubChannels } from '@agentry/contracts';
import { finishRun, getRun, insertRuleChain, insertRun, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { cancelRun } from '@agentry/runs';

/** The one cancel of a run: marked unless already ended, announced whatever happens to the mark. */
describe('cancelRun', () => {
  let handle: DbHandle;
  const published: Array<[string, unknown]> = [];
  const pubsub = { publish: async (channel: string, message: unknown) => void published.push([channel, message]) };

  beforeAll(async () => {
    handle = await createTestPglite();
    await insertRuleChain(handle.db, { id: 'a', kind: 'agent', agentId: null, name: 'a', category: null, dsl: {} });
  });
  afterAll(async () => {
    await handle?.close();
  });

  it('marks a queued run cancelled with the reason and tells its worker', async () => {
    await insertRun(handle.db, { id: 'r1', agentId: 'a', sessionId: null, source: 'api', request: {} });
    expect(await cancelRun({ db: handle.db, pubsub }, 'r1', 'the client went away')).toEqual({ marked: true, announced: true });
    expect(await getRun(handle.db, 'r1')).toMatchObject({ status: 'cancelled', error: 'the client went away' });
    expect(published).toContainEqual([PubSubChannels.runCancel, { runId: 'r1' }]);
  });

  it('leaves an ended run as it ended, and still announces; a failed publish is reported, not thrown', async () => {
    await insertRun(handle.db, { id: 'r2', agentId: 'a', sessionId: null, source: 'api', request: {} });
    await finishRun(handle.db, 'r2', { status: 'succeeded', output: 'done' });
    expect(await cancelRun({ db: handle.db, pubsub }, 'r2', 'late')).toEqual({ marked: false, announced: true });
    expect(await getRun(handle.db, 'r2')).toMatchObject({ status: 'succeeded', output: 'done' });
    const broken = { publish: async () => Promise.reject(new Error('redis is away')) };
    await insertRun(handle.db, { id: 'r3', agentId: 'a', sessionId: null, source: 'api', request: {} });
    expect(await cancelRun({ db: handle.db, pubsub: broken }, 'r3', 'x')).toEqual({ marked: true, announced: false });
  });
});
