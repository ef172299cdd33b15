import type { HeartbeatSettings as HeartbeatConfig } from '@agentry/contracts';

/**
 * The agreed no-op answer of a heartbeat: an answer that is exactly this (spaces and a final
 * period aside) means "nothing needs attention"; it is delivered nowhere and not kept.
 */
export const HEARTBEAT_OK = 'HEARTBEAT_OK';

/** The self-prompt when the agent's `heartbeat.prompt` is empty or absent. */
export const DEFAULT_HEARTBEAT_PROMPT =
  'Heartbeat: a scheduled check-in; no user is waiting. Review your instructions and this conversation for anything ' +
  `that needs attention now. If nothing does, answer exactly ${HEARTBEAT_OK} and nothing else; otherwise answer with the message to send.`;

/** The session (key and channel) a heartbeat's turns are kept in, one per agent. */
export const HEARTBEAT_SESSION = { key: 'heartbeat', channel: 'heartbeat' } as const;

const INTERVAL = /^(\d+)(s|m|h)$/;
const CLOCK = /^([01]\d|2[0-3]):([0-5]\d)$|^24:00$/;

/**
 * The six-field cron schedule of an interval, or the reason it has none. Ticks align to the clock
 * (every 30m: :00 and :30), so every scheduler replica and both bus adapters agree on each tick,
 * which is what makes a tick fire once (the cron_runs key is the tick).
 */
export function heartbeatSchedule(interval: string): { ok: true; schedule: string } | { ok: false; reason: string } {
  const m = INTERVAL.exec(interval.trim());
  const refuse = (why: string) => ({ ok: false as const, reason: `heartbeat.interval "${interval}" ${why}` });
  if (!m) return refuse('is not a duration like 30s, 30m or 1h');
  const n = Number(m[1]);
  const unit = m[2]!;
  const per = unit === 'h' ? 24 : 60;
  if (n < 1 || per % n !== 0) return refuse(`must divide ${per} (${unit === 'h' ? 'hours of a day' : unit === 'm' ? 'minutes of an hour' : 'seconds of a minute'})`);
  if (unit === 's') return { ok: true, schedule: `*/${n} * * * * *` };
  if (unit === 'm') return { ok: true, schedule: `0 */${n} * * * *` };
  return { ok: true, schedule: `0 0 */${n} * * *` };
}

/** Minutes since midnight of `HH:MM`, or undefined when it is not one. */
function clockMinutes(value: string): number | undefined {
  if (!CLOCK.test(value)) return undefined;
  const [h, m] = value.split(':').map(Number) as [number, number];
  return h * 60 + m;
}

function validTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return tz.trim() !== '';
  } catch {
    return false;
  }
}

/** `platform:accountId:chatId` (the chat id may itself contain colons), or undefined. */
export function parseHeartbeatTarget(target: string | undefined): { platform: string; accountId: string; chatId: string } | undefined {
  if (!target) return undefined;
  const [platform, accountId, ...rest] = target.split(':');
  const chatId = rest.join(':');
  return platform && accountId && chatId ? { platform, accountId, chatId } : undefined;
}

/** What the schema cannot say about a heartbeat, as messages (the node's `validate`). */
export function heartbeatProblems(hb: HeartbeatConfig): string[] {
  const problems: string[] = [];
  const schedule = heartbeatSchedule(hb.interval);
  if (!schedule.ok) problems.push(schedule.reason);
  if (hb.timezone !== undefined && !validTimezone(hb.timezone)) problems.push(`heartbeat.timezone "${hb.timezone}" is not a known IANA time zone (e.g. UTC, Europe/Berlin)`);
  if (hb.activeHours) {
    const { start, end } = hb.activeHours;
    const s = clockMinutes(start);
    const e = clockMinutes(end);
    if (s === undefined || s === 24 * 60) problems.push(`heartbeat.activeHours.start "${start}" is not a time HH:MM (00:00 to 23:59)`);
    if (e === undefined) problems.push(`heartbeat.activeHours.end "${end}" is not a time HH:MM (00:00 to 24:00)`);
    if (s !== undefined && s === e) problems.push('heartbeat.activeHours: start and end are equal (an empty window); leave activeHours out for all day');
  }
  if (hb.target && !parseHeartbeatTarget(hb.target)) problems.push(`heartbeat.target "${hb.target}" is not platform:accountId:chatId`);
  return problems;
}

/** Minutes since midnight of `at` on the wall clock of `timezone`. */
function localMinutes(at: Date, timezone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return get('hour') * 60 + get('minute');
}

/**
 * Is `at` within the active hours, read on the wall clock of the time zone? Start inclusive, end
 * exclusive; an end before the start is a window crossing midnight (22:00-06:00). No window: always.
 */
export function withinActiveHours(hours: HeartbeatConfig['activeHours'], timezone: string | undefined, at: Date): boolean {
  if (!hours) return true;
  const start = clockMinutes(hours.start);
  const end = clockMinutes(hours.end);
  if (start === undefined || end === undefined) return true;
  const now = localMinutes(at, timezone || 'UTC');
  return start < end ? now >= start && now < end : now >= start || now < end;
}

/** Is this answer the no-op token (nothing to deliver, nothing to keep)? */
export function isHeartbeatOk(output: string | null | undefined): boolean {
  return (output ?? '').trim().replace(/\.$/, '') === HEARTBEAT_OK;
}

/** The heartbeat of an agent's DSL: that of its first `ai/agent` node that has one. */
export function heartbeatOfDsl(dsl: unknown): HeartbeatConfig | undefined {
  const nodes = (dsl as { metadata?: { nodes?: unknown } } | null)?.metadata?.nodes;
  if (!Array.isArray(nodes)) return undefined;
  for (const node of nodes as { type?: unknown; configuration?: { heartbeat?: unknown } }[]) {
    const hb = node?.type === 'ai/agent' ? node.configuration?.heartbeat : undefined;
    if (hb && typeof hb === 'object' && typeof (hb as HeartbeatConfig).interval === 'string') return hb as HeartbeatConfig;
  }
  return undefined;
}
