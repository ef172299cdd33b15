/**
 * A readable description of a six-field cron schedule (second minute hour day month weekday),
 * for the cron form. The gateway is the judge of validity; this only explains. Self-contained:
 * unit-tested under Node.
 */

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
const ORDINALS = ['', 'first', 'second', 'third', 'fourth', 'fifth'];

export type CronDescription = { ok: true; text: string } | { ok: false; error: string };

const isAny = (f: string) => f === '*' || f === '?';
const isNumber = (f: string) => /^\d+$/.test(f);
const pad = (n: string | number) => String(n).padStart(2, '0');

function listText(items: string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** One field as words: `*` every unit, `*\/5` every 5 units, `1-5`, lists, names. */
function fieldText(field: string, unit: string, name: (v: string) => string = (v) => v): string {
  if (isAny(field)) return `every ${unit}`;
  return listText(
    field.split(',').map((part) => {
      const [range, step] = part.split('/');
      if (step !== undefined) {
        const every = `every ${step} ${unit}s`;
        if (range === '*' || range === undefined) return every;
        const [from, to] = range.split('-');
        return to !== undefined ? `${every} from ${name(from!)} through ${name(to)}` : `${every} starting at ${name(from!)}`;
      }
      const [from, to] = part.split('-');
      return to !== undefined ? `${name(from!)} through ${name(to)}` : name(from!);
    }),
  );
}

function monthName(v: string): string {
  const i = isNumber(v) ? Number(v) - 1 : MONTH_NAMES.indexOf(v.toUpperCase());
  return MONTHS[i] ?? v;
}

function dayName(v: string): string {
  const nth = /^(\w+)#(\d)$/.exec(v);
  if (nth) return `the ${ORDINALS[Number(nth[2])] ?? `${nth[2]}th`} ${dayName(nth[1]!)} of the month`;
  const last = /^(\w+)L$/i.exec(v);
  if (last && last[1]) return `the last ${dayName(last[1])} of the month`;
  const i = isNumber(v) ? Number(v) % 7 : DAY_NAMES.indexOf(v.toUpperCase());
  return DAYS[i] ?? v;
}

function timeText(sec: string, min: string, hour: string): string {
  if (isNumber(sec) && isNumber(min) && isNumber(hour)) {
    return `at ${pad(hour)}:${pad(min)}${sec === '0' || sec === '00' ? '' : `:${pad(sec)}`}`;
  }
  if (isNumber(sec) && isNumber(min) && sec === '0') {
    return min === '0' ? (isAny(hour) ? 'every hour, on the hour' : `on the hour, ${fieldText(hour, 'hour', (h) => `${pad(h)}:00`)}`) : `at minute ${min} of ${isAny(hour) ? 'every hour' : `hour ${fieldText(hour, 'hour')}`}`;
  }
  if (sec === '0' && isAny(hour)) return isAny(min) ? 'every minute' : min.startsWith('*/') ? `every ${min.slice(2)} minutes` : `at minute ${fieldText(min, 'minute')} of every hour`;
  const parts: string[] = [];
  parts.push(isAny(sec) ? 'every second' : sec.startsWith('*/') && !sec.includes(',') ? `every ${sec.slice(2)} seconds` : `at second ${fieldText(sec, 'second')}`);
  if (!isAny(min) || !isAny(hour)) parts.push(isAny(min) ? 'of every minute' : `of minute ${fieldText(min, 'minute')}`);
  if (!isAny(hour)) parts.push(`of hour ${fieldText(hour, 'hour')}`);
  return parts.join(' ');
}

function dateText(day: string, month: string, weekday: string): string {
  const parts: string[] = [];
  if (!isAny(day)) {
    parts.push(day === 'L' ? 'on the last day of the month' : `on day ${fieldText(day, 'day')} of the month`);
  }
  if (!isAny(weekday)) {
    const named = weekday.toUpperCase() === 'MON-FRI' || weekday === '1-5' ? 'on weekdays (Monday to Friday)' : `on ${fieldText(weekday, 'day', dayName)}`;
    parts.push(isAny(day) ? named : `or ${named}`);
  }
  if (!isAny(month)) parts.push(`in ${fieldText(month, 'month', monthName)}`);
  return parts.length ? parts.join(' ') : 'every day';
}

export function describeSchedule(expr: string): CronDescription {
  const fields = expr.trim().split(/\s+/).filter(Boolean);
  if (fields.length === 0) return { ok: false, error: 'enter a schedule: second minute hour day month weekday' };
  if (fields.length !== 6) {
    return { ok: false, error: `six fields are needed (second minute hour day month weekday); this has ${fields.length}${fields.length === 5 ? ': add the seconds in front, e.g. "0 ' + expr.trim() + '"' : ''}` };
  }
  if (fields.some((f) => !/^[\w*?,/#-]+$/.test(f))) return { ok: false, error: 'fields may hold digits, names, * ? , - / L and #' };
  const [sec, min, hour, day, month, weekday] = fields as [string, string, string, string, string, string];
  const time = timeText(sec, min, hour);
  const date = dateText(day, month, weekday);
  const frequent = /^every (second|\d+ seconds|minute|\d+ minutes|hour)/.test(time);
  return { ok: true, text: date === 'every day' ? (frequent ? time : `${time}, every day`) : `${time}, ${date}` };
}

/** Common schedules for the form's quick picks. */
export const SCHEDULE_PRESETS: Array<{ label: string; schedule: string }> = [
  { label: 'Every minute', schedule: '0 * * * * *' },
  { label: 'Every 15 minutes', schedule: '0 */15 * * * *' },
  { label: 'Every hour', schedule: '0 0 * * * *' },
  { label: 'Every day at 09:00', schedule: '0 0 9 * * *' },
  { label: 'Weekdays at 09:00', schedule: '0 0 9 * * MON-FRI' },
  { label: 'Mondays at 08:30', schedule: '0 30 8 * * MON' },
  { label: 'First of the month at 06:00', schedule: '0 0 6 1 * *' },
];
