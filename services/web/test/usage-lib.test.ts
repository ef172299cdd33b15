import { describe, expect, it } from 'vitest';
import { dailySeries, daysBetween, lastDays, principalLabel } from '../app/lib/usage.js';

describe('usage page helpers', () => {
  it('the last N UTC days, today included, as [from, to)', () => {
    const { from, to } = lastDays(7, new Date('2026-11-26T15:30:00Z'));
    expect([from.toISOString(), to.toISOString()]).toEqual(['2026-11-20T00:00:00.000Z', '2026-11-27T00:00:00.000Z']);
    expect(daysBetween(from, to)).toEqual(['2026-11-20', '2026-11-21', '2026-11-22', '2026-11-23', '2026-11-24', '2026-11-25', '2026-11-26']);
  });

  it('one point per day: a day without calls is 0, x in Unix seconds', () => {
    const row = (key: string, p: number, c: number) => ({ key, promptTokens: p, completionTokens: c, totalTokens: p + c, requests: 1 });
    expect(dailySeries([row('2026-11-25', 10, 2), row('2026-11-23', 5, 1)], ['2026-11-23', '2026-11-24', '2026-11-25'])).toEqual({
      x: [1795392000, 1795478400, 1795564800],
      prompt: [5, 0, 10],
      completion: [1, 0, 2],
    });
  });

  it('principals as people read them', () => {
    expect(['user:ann', 'api:bot:1', '', 'other'].map(principalLabel)).toEqual(['ann (user)', 'bot:1 (api account)', 'channels, cron and open mode', 'other']);
  });
});
