import Type, { type Static, type TSchema } from 'typebox';
import { Closed, IsoDate, PageOf, ResourceId, type Page } from './common.js';

/** Scheduled jobs (spec "Cron job", "Cron jobs"). */

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** Where a job's answer is also sent: a chat of a channel account the target agent is bound to. */
export const CronDeliver = Type.Object({
  platform: Type.String(),
  accountId: Type.String(),
  chatId: Type.String(),
});
export type CronDeliver = Static<typeof CronDeliver>;

export const CronJob = Type.Object({
  id: Type.String(),
  name: Type.String(),
  schedule: Type.String(),
  message: Type.String(),
  /** The agent the message goes to. */
  target: Type.String(),
  disabled: Type.Boolean(),
  timezone: Type.String(),
  deliver: Nullable(CronDeliver),
  /** Username of the creator: only they (or an admin) may change the job. */
  owner: Type.String(),
  /** Null while disabled. */
  nextRunAt: Nullable(IsoDate),
  lastRunAt: Nullable(IsoDate),
  lastStatus: Nullable(Type.String()),
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type CronJob = Static<typeof CronJob>;

export const CronJobList = Type.Array(CronJob);
export type CronJobList = Static<typeof CronJobList>;

/** One firing of a job. Its `id` is a number (the row's serial), unlike the job's. */
export const CronRun = Type.Object({
  id: Type.Integer(),
  cronJobId: Type.String(),
  scheduledAt: IsoDate,
  /** The agent run it started; null when none could be. */
  runId: Nullable(Type.String()),
  startedAt: IsoDate,
  finishedAt: Nullable(IsoDate),
  /** `skipped`: the fire started no run (its agent is disabled); `error` says why. */
  status: Type.Union([Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('skipped')]),
  outputExcerpt: Nullable(Type.String()),
  error: Nullable(Type.String()),
  deliveryStatus: Nullable(Type.Union([Type.Literal('queued'), Type.Literal('sent'), Type.Literal('failed'), Type.Literal('skipped')])),
  deliveryError: Nullable(Type.String()),
});
export type CronRun = Static<typeof CronRun>;

export const CronRunPage = PageOf(CronRun);
export type CronRunPage = Page<CronRun>;

/**
 * An agent's heartbeat (`configuration.heartbeat` of its `ai/agent` node): TpClaw's `heartbeat`
 * camelCased (`active_hours` is `activeHours`; `load_history` is not taken). The body of
 * PUT /agents/{id}/heartbeat and a field of the DSL.
 */
export const HeartbeatSettings = Type.Object({
  interval: Type.String({ description: '30s, 5m, 30m, 1h ...: seconds or minutes dividing 60, hours dividing 24 (ticks align to the clock)' }),
  prompt: Type.Optional(Type.String({ description: 'the self-prompt; empty or absent: the default, which asks for HEARTBEAT_OK when nothing needs attention' })),
  activeHours: Type.Optional(
    Type.Object({ start: Type.String({ description: 'HH:MM' }), end: Type.String({ description: 'HH:MM; before start: the window crosses midnight' }) }, { additionalProperties: false }),
  ),
  timezone: Type.Optional(Type.String({ description: 'IANA time zone of activeHours and the ticks (default UTC)' })),
  target: Type.Optional(Type.String({ description: 'platform:accountId:chatId an answer other than HEARTBEAT_OK is sent to; empty: kept in the session only' })),
  disabled: Type.Optional(Type.Boolean()),
}, { additionalProperties: false });
export type HeartbeatSettings = Static<typeof HeartbeatSettings>;

/** GET/PUT /agents/{id}/heartbeat: the heartbeat as the DSL holds it, and the cron job that fires it. */
export const AgentHeartbeat = Type.Object({
  heartbeat: Nullable(HeartbeatSettings),
  /** Its cron job (fires: GET /cron/{id}/runs); null before the first save with a heartbeat. */
  cronJobId: Nullable(Type.String()),
  /** The six-field schedule while on, else null. */
  schedule: Nullable(Type.String()),
  /** The next tick while on (a tick outside the active hours starts nothing), else null. */
  nextTickAt: Nullable(Type.String()),
});
export type AgentHeartbeat = Static<typeof AgentHeartbeat>;

// Requests.

/** A delivery as written: every field named, nothing else. */
const CronDeliverInput = Type.Object(
  {
    platform: Type.String({ minLength: 1, maxLength: 64 }),
    accountId: Type.String({ minLength: 1, maxLength: 128 }),
    chatId: Type.String({ minLength: 1, maxLength: 512 }),
  },
  Closed,
);

const jobFields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  schedule: Type.String({ minLength: 1, maxLength: 256 }),
  message: Type.String({ minLength: 1, maxLength: 100_000 }),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  disabled: Type.Optional(Type.Boolean()),
  deliver: Type.Optional(Type.Union([CronDeliverInput, Type.Null()])),
};
const CronTarget = Type.String({ minLength: 1 });

// Closed: an unknown field (`timeZone`, `agentId`...) is a 400 naming it, not a setting lost.
/** POST /cron: the target agent is named in the body. */
export const CronJobCreateBody = Type.Object({ ...jobFields, target: CronTarget }, Closed);
export type CronJobCreateBody = Static<typeof CronJobCreateBody>;
/** POST /agents/{agentId}/cron: the path names the agent; a target, if given, must repeat it. */
export const AgentCronJobCreateBody = Type.Object({ ...jobFields, target: Type.Optional(CronTarget) }, Closed);
export type AgentCronJobCreateBody = Static<typeof AgentCronJobCreateBody>;
export const CronJobUpdateBody = Type.Object(
  {
    name: Type.Optional(jobFields.name),
    schedule: Type.Optional(jobFields.schedule),
    message: Type.Optional(jobFields.message),
    timezone: jobFields.timezone,
    disabled: jobFields.disabled,
    deliver: jobFields.deliver,
    target: Type.Optional(CronTarget),
  },
  Closed,
);
export type CronJobUpdateBody = Static<typeof CronJobUpdateBody>;
export const CronJobToggleBody = Type.Object({ disabled: Type.Boolean() }, Closed);
export type CronJobToggleBody = Static<typeof CronJobToggleBody>;

/** GET /cron: admins may narrow the list to one agent. */
export const CronJobListQuery = Type.Object({ agentId: Type.Optional(Type.String()) });
export type CronJobListQuery = Static<typeof CronJobListQuery>;

const CronJobId = Type.String({ minLength: 1, maxLength: 128 });
export const CronJobParams = Type.Object({ id: CronJobId });
export type CronJobParams = Static<typeof CronJobParams>;
export const AgentCronJobParams = Type.Object({ agentId: ResourceId, id: CronJobId });
export type AgentCronJobParams = Static<typeof AgentCronJobParams>;
