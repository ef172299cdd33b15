import { nextTick } from './runs/schedule.js';

/**
 * The limits on cron jobs a user or an agent creates, one implementation for both doors (the
 * `cron` tool and the gateway's cron routes): a floor on the interval between two ticks, so a
 * job cannot fire every second, and a cap on how many jobs one owner holds.
 */

/** The shortest gap between the next few ticks, in seconds (Infinity when it fires at most once). */
export function shortestGap(schedule: string, timezone: string): number {
  let gap = Infinity;
  let prev = nextTick(schedule, timezone);
  for (let i = 0; i < 10 && prev; i++) {
    const next = nextTick(schedule, timezone, prev);
    if (!next) break;
    gap = Math.min(gap, (next.getTime() - prev.getTime()) / 1000);
    prev = next;
  }
  return gap;
}

/** Why a schedule fires too often for `minIntervalSeconds`, or null when it does not. */
export function tooFrequent(schedule: string, timezone: string, minIntervalSeconds: number, where = 'here'): string | null {
  const gap = shortestGap(schedule, timezone);
  if (gap >= minIntervalSeconds) return null;
  return `schedule: "${schedule}" fires every ${gap} s; jobs created ${where} must be at least ${minIntervalSeconds} s apart`;
}

/** Why an owner holding `count` jobs may not add one under `maxJobs`, or null when it may. */
export function overJobCap(count: number, maxJobs: number, who = 'you'): string | null {
  if (count < maxJobs) return null;
  return `cron: ${who} already ${who === 'you' ? 'have' : 'has'} ${count} jobs (the limit is ${maxJobs}); disable or delete one first`;
}
