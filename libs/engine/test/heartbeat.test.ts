import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRequest } from '@agentry/contracts';
import { claimRun, ensureSession, getRun, insertRuleChain, insertRun, listSessionMessages, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { runAgent, type ModelEvent } from '../src/index.js';
import { validateRuleChain } from '@agentry/definitions';
import {
  HEARTBEAT_OK,
  heartbeatOfDsl,
  heartbeatProblems,
  heartbeatSchedule,
  isHeartbeatOk,
  nextTick,
  withinActiveHours,
} from '@agentry/runs';
import { fakeRunDeps } from './fake-run-deps.js';

const at = (iso: string) => new Date(iso);

describe('heartbeat schedule: an interval becomes clock-aligned cron ticks', () => {
  it('seconds, minutes and hours that divide their unit; anything else is refused with the reason', () => {
    expect(heartbeatSchedule('2s')).toEqual({ ok: true, schedule: '*/2 * * * * *' });
    expect(heartbeatSchedule('30m')).toEqual({ ok: true, schedule: '0 */30 * * * *' });
    expect(heartbeatSchedule('1h')).toEqual({ ok: true, schedule: '0 0 */1 * * *' });
    expect(heartbeatSchedule('7m')).toMatchObject({ ok: false, reason: expect.stringContaining('must divide 60') });
    expect(heartbeatSchedule('5h')).toMatchObject({ ok: false, reason: expect.stringContaining('must divide 24') });
    expect(heartbeatSchedule('soon')).toMatchObject({ ok: false, reason: expect.stringContaining('not a duration') });
    expect(heartbeatSchedule('0m').ok).toBe(false);
  });

  it('every 30m in a time zone ticks at :00 and :30 of that zone', () => {
    const { schedule } = heartbeatSchedule('30m') as { schedule: string };
    expect(nextTick(schedule, 'Asia/Kolkata', at('2026-01-01T00:01:00Z'))!.toISOString()).toBe('2026-01-01T00:30:00.000Z');
    // Kolkata is UTC+05:30: its :00 and :30 are UTC's :30 and :00 too, so check a :45 zone.
    expect(nextTick(schedule, 'Asia/Kathmandu', at('2026-01-01T00:01:00Z'))!.toISOString()).toBe('2026-01-01T00:15:00.000Z');
  });
});

describe('active hours, on the wall clock of the time zone', () => {
  const day = { start: '09:00', end: '22:00' };
  it('a day window: start inclusive, end exclusive', () => {
    expect(withinActiveHours(day, 'UTC', at('2026-03-02T09:00:00Z'))).toBe(true);
    expect(withinActiveHours(day, 'UTC', at('2026-03-02T08:59:59Z'))).toBe(false);
    expect(withinActiveHours(day, 'UTC', at('2026-03-02T21:59:00Z'))).toBe(true);
    expect(withinActiveHours(day, 'UTC', at('2026-03-02T22:00:00Z'))).toBe(false);
  });

  it('read in the time zone: 08:30 UTC is 09:30 in Berlin (winter) and 17:30 in Tokyo, 03:30 in New York', () => {
    const t = at('2026-01-15T08:30:00Z');
    expect(withinActiveHours(day, 'UTC', t)).toBe(false);
    expect(withinActiveHours(day, 'Europe/Berlin', t)).toBe(true);
    expect(withinActiveHours(day, 'Asia/Tokyo', t)).toBe(true);
    expect(withinActiveHours(day, 'America/New_York', t)).toBe(false);
    // Summer time: 07:30 UTC is 09:30 in Berlin in July, 08:30 in January.
    expect(withinActiveHours(day, 'Europe/Berlin', at('2026-07-15T07:30:00Z'))).toBe(true);
    expect(withinActiveHours(day, 'Europe/Berlin', at('2026-01-15T07:30:00Z'))).toBe(false);
  });

  it('a window crossing midnight (22:00-06:00): late evening and early morning, not the day', () => {
    const night = { start: '22:00', end: '06:00' };
    expect(withinActiveHours(night, 'Europe/Berlin', at('2026-01-15T21:30:00Z'))).toBe(true); // 22:30 local
    expect(withinActiveHours(night, 'Europe/Berlin', at('2026-01-15T23:30:00Z'))).toBe(true); // 00:30 local
    expect(withinActiveHours(night, 'Europe/Berlin', at('2026-01-16T04:59:00Z'))).toBe(true); // 05:59 local
    expect(withinActiveHours(night, 'Europe/Berlin', at('2026-01-16T05:00:00Z'))).toBe(false); // 06:00 local
    expect(withinActiveHours(night, 'Europe/Berlin', at('2026-01-15T12:00:00Z'))).toBe(false);
  });

  it('no window: always; up to 24:00 covers the last minute', () => {
    expect(withinActiveHours(undefined, undefined, at('2026-01-15T03:00:00Z'))).toBe(true);
    expect(withinActiveHours({ start: '00:00', end: '24:00' }, 'UTC', at('2026-01-15T23:59:30Z'))).toBe(true);
  });
});

describe('heartbeat in the DSL', () => {
  const dsl = (heartbeat: unknown) => ({ ruleChain: { id: 'hb', name: 'hb' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { heartbeat } }], connections: [] } });

  it('a valid heartbeat passes validation and is found on the ai/agent node', () => {
    const hb = { interval: '30m', prompt: '', activeHours: { start: '09:00', end: '22:00' }, timezone: 'Europe/Berlin', target: 'telegram:main:42' };
    expect(validateRuleChain(dsl(hb), { requireAgent: true })).toMatchObject({ ok: true });
    expect(heartbeatOfDsl(dsl(hb))).toEqual(hb);
    expect(heartbeatOfDsl(dsl(undefined))).toBeUndefined();
  });

  it('each mistake is named: interval, clock times, equal times, time zone, target, unknown fields', () => {
    expect(heartbeatProblems({ interval: '7m', activeHours: { start: '9:00', end: '25:00' }, timezone: 'Mars/Base', target: 'telegram' })).toEqual([
      expect.stringContaining('heartbeat.interval "7m"'),
      expect.stringContaining('heartbeat.timezone "Mars/Base"'),
      expect.stringContaining('heartbeat.activeHours.start "9:00"'),
      expect.stringContaining('heartbeat.activeHours.end "25:00"'),
      expect.stringContaining('heartbeat.target "telegram"'),
    ]);
    expect(heartbeatProblems({ interval: '1h', activeHours: { start: '10:00', end: '10:00' } })).toEqual([expect.stringContaining('empty window')]);
    const bad = validateRuleChain(dsl({ interval: '30m', active_hours: { start: '09:00', end: '22:00' } }), { requireAgent: true });
    expect(bad.ok).toBe(false);
    expect(JSON.stringify(bad)).toContain('active_hours');
    expect(validateRuleChain(dsl({ interval: '7m' }), { requireAgent: true }).ok).toBe(false);
  });

  it('the no-op token, with spaces or a final period, and nothing else', () => {
    expect(isHeartbeatOk(HEARTBEAT_OK)).toBe(true);
    expect(isHeartbeatOk(' HEARTBEAT_OK.\n')).toBe(true);
    expect(isHeartbeatOk('HEARTBEAT_OK, but the disk is full')).toBe(false);
    expect(isHeartbeatOk('')).toBe(false);
  });
});

describe('the worker: a heartbeat answer', () => {
  let handle: DbHandle;
  beforeAll(async () => {
    handle = await createTestPglite();
    const dsl = { ruleChain: { id: 'beater', name: 'beater' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p' } }], connections: [] } };
    await insertRuleChain(handle.db, { id: 'beater', kind: 'agent', agentId: null, name: 'beater', category: null, dsl });
  });
  afterAll(async () => {
    await handle?.close();
  });

  let n = 0;
  async function beat(answer: string) {
    const session = await ensureSession(handle.db, { agentId: 'beater', sessionKey: 'heartbeat', channel: 'heartbeat' });
    const id = `hb_run_${++n}`;
    const request: RunRequest = { messages: [{ role: 'user', content: 'check' }], reply: { platform: 'telegram', accountId: 'main', chatId: '42' } };
    await insertRun(handle.db, { id, agentId: 'beater', sessionId: session.id, source: 'heartbeat', request: request as unknown as JsonValue });
    const run = (await claimRun(handle.db, id))!;
    const model = async function* (): AsyncIterable<ModelEvent> {
      yield { type: 'text', text: answer };
      yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
    };
    const { deps, record } = fakeRunDeps(handle.db, { stream: model });
    await runAgent(deps, run, new AbortController().signal);
    return { id, record, run: await getRun(handle.db, id), messages: await listSessionMessages(handle.db, session.id) };
  }

  it('HEARTBEAT_OK succeeds and is neither sent nor kept in the heartbeat session', async () => {
    const { record, run, messages } = await beat('HEARTBEAT_OK');
    expect(run).toMatchObject({ status: 'succeeded', output: 'HEARTBEAT_OK', source: 'heartbeat' });
    expect(record.replies).toEqual([]);
    expect(messages).toEqual([]);
  });

  it('anything else is sent to the target and kept in the session', async () => {
    const { id, record, messages } = await beat('The backup failed at 03:00.');
    expect(record.replies).toEqual([{ runId: id, text: 'The backup failed at 03:00.' }]);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'check'],
      ['assistant', 'The backup failed at 03:00.'],
    ]);
  });
});
