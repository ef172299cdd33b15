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
} as const;

/** Payload on `run-cancel`. */
export interface RunCancelMessage {
  runId: string;
}

/** Payload on `invalidate`: which cached area changed (and optionally which id). */
export interface InvalidateMessage {
  area: 'config' | 'agents' | 'users' | 'apiKeys' | 'providers' | 'channels' | 'cron';
  id?: string;
}
