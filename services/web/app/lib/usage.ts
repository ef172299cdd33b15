import type { UsageRow } from '@agentry/client';

/** The UTC days of [from, to) as `YYYY-MM-DD`, oldest first. */
export function daysBetween(from: Date, to: Date): string[] {
  const days: string[] = [];
  const day = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate()));
  while (day < to) {
    days.push(day.toISOString().slice(0, 10));
    day.setUTCDate(day.getUTCDate() + 1);
  }
  return days;
}

/**
 * `groupBy=day` rows as the chart's columns: one point per UTC day of the period (a day without
 * usage is 0, not a gap the line would jump over), x in Unix seconds as uPlot reads time.
 */
export function dailySeries(rows: readonly UsageRow[], days: readonly string[]): { x: number[]; prompt: number[]; completion: number[] } {
  const byDay = new Map(rows.map((r) => [r.key, r]));
  return {
    x: days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000),
    prompt: days.map((d) => byDay.get(d)?.promptTokens ?? 0),
    completion: days.map((d) => byDay.get(d)?.completionTokens ?? 0),
  };
}

/** The period the page shows: the last `days` UTC days, today included. */
export function lastDays(days: number, now = new Date()): { from: Date; to: Date } {
  const to = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
  const from = new Date(to);
  from.setUTCDate(from.getUTCDate() - days);
  return { from, to };
}

/** A principal as people read it: `user:ann` -> `ann (user)`, `api:bot` -> `bot (api account)`, '' -> channels and cron. */
export function principalLabel(key: string): string {
  if (key === '') return 'channels, cron and open mode';
  const [kind, ...rest] = key.split(':');
  const name = rest.join(':');
  if (kind === 'user') return `${name} (user)`;
  if (kind === 'api') return `${name} (api account)`;
  return key;
}
