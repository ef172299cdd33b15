import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRunJob } from '@agentry/contracts';
import { getRun, insertRuleChain, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { submitRun } from '@agentry/runs';

/**
 * The agent-run job a chat writes: `v: 3` names its gateway's reply channel (the worker asks
 * whether that gateway listens beside its lease); during a rolling upgrade from a release whose
 * workers refuse `v: 3` (`reliability.rolling_upgrade`) it is left out, and the row still names it.
 */
describe('submitRun: the agent-run job', () => {
  let handle: DbHandle;
  const jobs: AgentRunJob[] = [];
  const queue = { enqueue: async (_queue: string, data: AgentRunJob) => (jobs.push(data), data.runId) };
  const request = { messages: [{ role: 'user' as const, content: 'hi' }] };

  beforeAll(async () => {
    handle = await createTestPglite();
    await insertRuleChain(handle.db, { id: 'a', kind: 'agent', agentId: null, name: 'a', category: null, dsl: {} });
  });
  afterAll(async () => {
    await handle?.close();
  });

  it('names the reply channel (v3) when the caller has one', async () => {
    await submitRun({ db: handle.db, queue }, { agentId: 'a', source: 'api', request, runId: 'r-v3', replyTo: 'gw-1' });
    expect(jobs.at(-1)).toEqual({ type: 'agent-run', v: 3, runId: 'r-v3', replyTo: 'gw-1' });
  });

  it('leaves it out (v1, as older workers read) with replyNotInJob; the row keeps it', async () => {
    await submitRun({ db: handle.db, queue }, { agentId: 'a', source: 'api', request, runId: 'r-old', replyTo: 'gw-1', replyNotInJob: true });
    expect(jobs.at(-1)).toEqual({ type: 'agent-run', v: 1, runId: 'r-old' });
    expect(await getRun(handle.db, 'r-old')).toMatchObject({ replyTo: 'gw-1' });
  });

  it('without a reply channel (cron, channel messages) the job stays v1', async () => {
    await submitRun({ db: handle.db, queue }, { agentId: 'a', source: 'cron', request, runId: 'r-cron' });
    expect(jobs.at(-1)).toEqual({ type: 'agent-run', v: 1, runId: 'r-cron' });
  });
});
