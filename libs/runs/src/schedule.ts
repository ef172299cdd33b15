import { Cron } from 'croner';

/** The field order of a cron job's schedule. */
const SCHEDULE_FIELDS = ['second', 'minute', 'hour', 'day', 'month', 'weekday'] as const;

/** The schedule with its whitespace normalised, or the reason it is refused. */
type ScheduleCheck = { ok: true; schedule: string } | { ok: false; reason: string };

/**
 * Checks a cron job's schedule the way both scheduler adapters will read it: exactly six fields
 * (second minute hour day month weekday), each in range, at least one future tick, in a valid
 * IANA time zone. `W` (nearest weekday) is refused: croner (embedded mode) accepts it but BullMQ's
 * parser (cluster mode) does not, and a job must fire the same in both modes.
 */
export function checkSchedule(schedule: string, timezone: string): ScheduleCheck {
  const tz = checkTimezone(timezone);
  if (!tz.ok) return tz;
  const normalised = schedule.trim().replace(/\s+/g, ' ');
  const fields = normalised === '' ? [] : normalised.split(' ');
  if (fields.length !== SCHEDULE_FIELDS.length) {
    return {
      ok: false,
      // Five fields is a classic crontab line: say the six-field form it most likely means.
      reason:
        `schedule "${schedule}" has ${fields.length} field${fields.length === 1 ? '' : 's'}; it needs exactly six: ${SCHEDULE_FIELDS.join(' ')}` +
        (fields.length === 5 ? `; did you mean "0 ${normalised}" (a crontab line with the seconds in front)?` : ''),
    };
  }
  if (/w/i.test(fields[3]!)) return { ok: false, reason: `schedule "${schedule}": W (nearest weekday) in the day field is not supported` };
  let next: Date | null;
  try {
    next = new Cron(normalised, { mode: '6-part', timezone }).nextRun();
  } catch (err) {
    const message = (err as Error).message.replace(/^CronPattern:\s*/, '');
    return { ok: false, reason: `schedule "${schedule}": ${message}` };
  }
  if (!next) return { ok: false, reason: `schedule "${schedule}" never fires` };
  return { ok: true, schedule: normalised };
}

/** Is this an IANA time zone name the runtime knows? */
function checkTimezone(timezone: string): { ok: true } | { ok: false; reason: string } {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    if (timezone.trim() === '') throw new RangeError('empty');
    return { ok: true };
  } catch {
    return { ok: false, reason: `timezone "${timezone}" is not a known IANA time zone (e.g. UTC, Europe/Berlin)` };
  }
}

/** The next tick of a (valid) schedule after `after`, or null when there is none. */
export function nextTick(schedule: string, timezone: string, after: Date = new Date()): Date | null {
  try {
    return new Cron(schedule, { mode: '6-part', timezone }).nextRun(after);
  } catch {
    return null;
  }
}

/**
 * The shortest gap between the next few ticks, in seconds (Infinity when it fires at most once):
 * what the agent's `cron` tool and the REST routes hold a plain user's schedule to.
 */
export function shortestGapSeconds(schedule: string, timezone: string): number {
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
