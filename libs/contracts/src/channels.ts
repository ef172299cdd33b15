import type { RunEvent } from './events.js';

/** The spec's platform ids: `api` plus neutral stand-ins for six messaging platforms. */
export const PLATFORMS = ['api', 'chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** True when `value` is one of the spec's platform ids. */
export function isPlatform(value: string): value is Platform {
  return (PLATFORMS as readonly string[]).includes(value);
}

/** A run's own channel: a template literal type so that `PubSubMessages` can say what it carries. */
export type RunChannel = `run:${string}`;
/** One gateway process's reply channel: the events of every run it waits for (`runId` tells them apart). */
export type ReplyChannel = `replies:${string}`;
/** Where the gateway that asked for a forced compaction waits for its outcome. */
export type CompactionChannel = `compaction:${string}`;
/** An outbound message's own channel. */
export type OutboundChannel = `outbound:${string}`;

/**
 * Pub/sub channel names. Messages on them are small JSON objects; anything large or durable
 * lives in Postgres and the message names it by id.
 */
export const PubSubChannels = {
  /** Events of one run (a run whose row names no `reply_to`: cron fires, channel messages). */
  run: (runId: string): RunChannel => `run:${runId}`,
  /**
   * Events of every run a gateway process waits for, on one subscription for the process's life
   * (no SUBSCRIBE and UNSUBSCRIBE per chat); the run row's `reply_to` names it.
   */
  replies: (processId: string): ReplyChannel => `replies:${processId}`,
  /** Something cached by every replica changed in Postgres: re-read it. */
  invalidate: 'invalidate',
  /** A client went away: the worker running this run aborts it. */
  runCancel: 'run-cancel',
  /** The outcome of one outbound message (the connector publishes it when the message ends). */
  outbound: (messageId: string): OutboundChannel => `outbound:${messageId}`,
  /** The outcome of one forced compaction (`session-compact` job), for the gateway request that waits. */
  compaction: (requestId: string): CompactionChannel => `compaction:${requestId}`,
} as const;

/**
 * Names of what a resumable run keeps beside its channel: the log of its events (a client that
 * resumes its stream on any gateway reads what it missed there) and the count of resumes (a
 * gateway whose client left cancels the run after the grace only when nobody resumed it since).
 */
export const RunKeeps = {
  events: (runId: string) => `run-events:${runId}`,
  resumes: (runId: string) => `run-resumes:${runId}`,
  /** The liveness lease of the worker running the run (`Bus.lease`): renewed while it lives. */
  lease: (runId: string) => `run-lease:${runId}`,
} as const;

/** Payload on `run-cancel`. */
export interface RunCancelMessage {
  runId: string;
}

/** Payload on `invalidate`: which cached area changed (and optionally which id). */
export interface InvalidateMessage {
  area: 'config' | 'agents' | 'users' | 'apiKeys' | 'providers' | 'channels' | 'cron' | 'skills';
  id?: string;
}

/** The one pub/sub call `announceChange` makes; the bus's `PubSub` port fits it as it is. */
export interface InvalidatePublisher {
  publish(channel: typeof PubSubChannels.invalidate, message: InvalidateMessage): Promise<void>;
}

/** Where a failed announcement is reported (a pino logger fits). */
export interface WarnLogger {
  warn(fields: object, message: string): void;
}

/**
 * Tells every replica (this one included) that cached rows changed, after the change committed:
 * `{area, id}` for each id, or one `{area}` (the whole area) without ids. A failed publish is
 * logged, not thrown: the write stands, and each cache's periodic reload (or time limit) heals
 * it. It lives beside the message so that services and libs alike may call it without a layer
 * importing another it must not.
 */
export async function announceChange(
  pubsub: InvalidatePublisher,
  logger: WarnLogger,
  area: InvalidateMessage['area'],
  ids?: readonly string[],
): Promise<void> {
  for (const id of ids ?? [undefined]) {
    const message: InvalidateMessage = id === undefined ? { area } : { area, id };
    try {
      await pubsub.publish(PubSubChannels.invalidate, message);
    } catch (err) {
      // "a cron invalidation", "an agents invalidation": the area names what stays stale.
      logger.warn({ err, area, id }, `could not publish ${/^[aeiou]/i.test(area) ? 'an' : 'a'} ${area} invalidation`);
    }
  }
}

/** Payload on `outbound:<id>`: the message ended (the row holds the details). */
export interface OutboundOutcomeMessage {
  id: string;
  status: 'sent' | 'failed';
}

/** The errors a forced compaction may end with, by their `@agentry/errors` code. */
export const COMPACTION_ERRORS = ['NOT_FOUND', 'VALIDATION', 'RATE_LIMITED', 'UPSTREAM', 'INTERNAL'] as const;
export type CompactionErrorCode = (typeof COMPACTION_ERRORS)[number];

export function isCompactionErrorCode(code: string): code is CompactionErrorCode {
  return (COMPACTION_ERRORS as readonly string[]).includes(code);
}

/**
 * Payload on `compaction:<requestId>`: a worker took the job (`started`: the gateway then waits
 * for the summary call, up to `worker.max_run_ms`), then what was summarised, or the error the
 * caller gets (its message is the one the client reads: human, never a secret).
 */
export type CompactionOutcomeMessage =
  | { started: true }
  | { ok: true; compacted: number; summary: string | null }
  | { ok: false; code: CompactionErrorCode; message: string };

/**
 * Which message each pub/sub channel carries. The bus's `PubSub` port is typed by it, so that a
 * publisher and its subscribers cannot disagree without a compile error; per-id channels are
 * template literal index signatures (every `run:<id>` carries run events).
 */
export interface PubSubMessages {
  [PubSubChannels.invalidate]: InvalidateMessage;
  [PubSubChannels.runCancel]: RunCancelMessage;
  [channel: RunChannel]: RunEvent;
  [channel: ReplyChannel]: RunEvent;
  [channel: OutboundChannel]: OutboundOutcomeMessage;
  [channel: CompactionChannel]: CompactionOutcomeMessage;
}
export type PubSubChannel = keyof PubSubMessages & string;
