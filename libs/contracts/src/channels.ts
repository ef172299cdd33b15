/** The spec's platform ids: `api` plus neutral stand-ins for six messaging platforms. */
export const PLATFORMS = ['api', 'chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** True when `value` is one of the spec's platform ids. */
export function isPlatform(value: string): value is Platform {
  return (PLATFORMS as readonly string[]).includes(value);
}

/**
 * Pub/sub channel names. Messages on them are small JSON objects; anything large or durable
 * lives in Postgres and the message names it by id.
 */
export const PubSubChannels = {
  /** Events of one run. */
  run: (runId: string) => `run:${runId}`,
  /** Something cached by every replica changed in Postgres: re-read it. */
  invalidate: 'invalidate',
  /** A client went away: the worker running this run aborts it. */
  runCancel: 'run-cancel',
  /** The outcome of one outbound message (the connector publishes it when the message ends). */
  outbound: (messageId: string) => `outbound:${messageId}`,
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

/** Payload on `outbound:<id>`: the message ended (the row holds the details). */
export interface OutboundOutcomeMessage {
  id: string;
  status: 'sent' | 'failed';
}
