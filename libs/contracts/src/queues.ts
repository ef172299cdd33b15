import Type, { type Static } from 'typebox';
import { TRACEPARENT_PATTERN } from './trace-context.js';

/**
 * Queue names and job payloads. Payloads carry ids only (the row in Postgres is the truth),
 * carry a version `v` so that a rolling deploy can tell old jobs from new, and are a union
 * tagged by `type` so that consumers switch over them exhaustively.
 */
export const QueueNames = {
  agentRun: 'agent-run',
  channelSend: 'channel-send',
  cronFire: 'cron-fire',
} as const;
export type QueueName = (typeof QueueNames)[keyof typeof QueueNames];

/**
 * `v: 2` adds the W3C `traceparent` of the request that made the run (tracing on only: with
 * tracing off producers still write `v: 1`, which every deployed worker reads).
 *
 * `v: 3` adds `replyTo`, the id of the reply channel the run's gateway waits on (the row's
 * `reply_to`, which never changes), and the `traceparent` when tracing is on: the worker asks
 * whether that gateway still listens in the same Redis write as its run lease, before the claim
 * has read the row (one round trip fewer before the first token). Written for every run with a
 * reply channel (a gateway's chat), so workers must be deployed before gateways: a worker older
 * than `v: 3` refuses the job as malformed.
 */
export const AgentRunJob = Type.Union([
  Type.Object({ type: Type.Literal('agent-run'), v: Type.Literal(1), runId: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
  Type.Object(
    {
      type: Type.Literal('agent-run'),
      v: Type.Literal(2),
      runId: Type.String({ minLength: 1 }),
      traceparent: Type.String({ pattern: TRACEPARENT_PATTERN }),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('agent-run'),
      v: Type.Literal(3),
      runId: Type.String({ minLength: 1 }),
      replyTo: Type.String({ minLength: 1 }),
      traceparent: Type.Optional(Type.String({ pattern: TRACEPARENT_PATTERN })),
    },
    { additionalProperties: false },
  ),
]);
export type AgentRunJob = Static<typeof AgentRunJob>;

/**
 * `POST /sessions/{id}/compact`, done by a worker with its model client: ids only (the session's
 * row is the truth; the principal is who asked and pays). The worker answers on
 * `compaction:<requestId>`, where the gateway that asked waits.
 */
export const SessionCompactJob = Type.Object(
  {
    type: Type.Literal('session-compact'),
    v: Type.Literal(1),
    sessionId: Type.String({ minLength: 1 }),
    principal: Type.String(),
    requestId: Type.String({ minLength: 1 }),
  },
  { additionalProperties: false },
);
export type SessionCompactJob = Static<typeof SessionCompactJob>;

/** What the `agent-run` queue carries: runs, and the forced compactions the agent workers do too. */
export const AgentQueueJob = Type.Union([AgentRunJob, SessionCompactJob]);
export type AgentQueueJob = Static<typeof AgentQueueJob>;

/** `v: 2` adds the `traceparent` of the run (or send) that queued the message, as `agent-run`'s. */
export const ChannelSendJob = Type.Union([
  Type.Object({ type: Type.Literal('channel-send'), v: Type.Literal(1), messageId: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
  Type.Object(
    { type: Type.Literal('channel-send'), v: Type.Literal(2), messageId: Type.String({ minLength: 1 }), traceparent: Type.String({ pattern: TRACEPARENT_PATTERN }) },
    { additionalProperties: false },
  ),
]);
export type ChannelSendJob = Static<typeof ChannelSendJob>;

export const CronFireJob = Type.Object(
  { type: Type.Literal('cron-fire'), v: Type.Literal(1), cronJobId: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export type CronFireJob = Static<typeof CronFireJob>;

export const JobPayload = Type.Union([AgentRunJob, SessionCompactJob, ChannelSendJob, CronFireJob]);
export type JobPayload = Static<typeof JobPayload>;

/**
 * Which payload type each queue carries. The bus's `JobQueue` port is typed by it, so that a
 * wrong payload is a compile error at the producer. Consumers still check jobs with the schemas
 * above: a job may come from an older or newer deploy.
 */
export interface QueuePayloads {
  [QueueNames.agentRun]: AgentQueueJob;
  [QueueNames.channelSend]: ChannelSendJob;
  [QueueNames.cronFire]: CronFireJob;
}
