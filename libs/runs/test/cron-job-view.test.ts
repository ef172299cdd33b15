import { describe, expect, it } from 'vitest';
import { Value } from 'typebox/value';
import { CronJob } from '@agentry/contracts';
import type { CronJobRecord } from '@agentry/db';
import { cronJobView } from '@agentry/runs';

/** The one view of a cron job (REST routes and the agent's `cron` tool): the API's shape, the next tick from now. */

const job: CronJobRecord = {
  id: 'j1',
  agentId: 'helper',
  name: 'morning',
  schedule: '0 0 9 * * *',
  message: 'good morning',
  timezone: 'Europe/Berlin',
  disabled: false,
  deliver: { platform: 'chat_a', accountId: 'main', chatId: 'c1' },
  owner: 'alice',
  createdAt: new Date('2026-01-01T00:00:00Z'),
  updatedAt: new Date('2026-01-02T00:00:00Z'),
  lastRunAt: new Date('2026-01-02T08:00:00Z'),
  lastStatus: 'succeeded',
};

describe('cronJobView', () => {
  it('answers the CronJob contract, the agent as target and dates in ISO 8601', () => {
    const view = cronJobView(job, new Date('2026-01-03T12:00:00Z'));
    expect(Value.Check(CronJob, view)).toBe(true);
    expect(view).toMatchObject({ target: 'helper', owner: 'alice', createdAt: '2026-01-01T00:00:00.000Z', lastRunAt: '2026-01-02T08:00:00.000Z', lastStatus: 'succeeded' });
  });

  it('works the next tick out in the job time zone, after the given moment', () => {
    // 09:00 in Berlin in winter is 08:00 UTC.
    expect(cronJobView(job, new Date('2026-01-03T12:00:00Z')).nextRunAt).toBe('2026-01-04T08:00:00.000Z');
  });

  it('has no next tick while disabled, and no last run before the first fire', () => {
    const view = cronJobView({ ...job, disabled: true, lastRunAt: null, lastStatus: null });
    expect(view.nextRunAt).toBeNull();
    expect(view.lastRunAt).toBeNull();
  });
});
