export interface ConnectorOptions {
  /** Sends of one process at once. */
  concurrency: number;
  /** Tries per message, the first included, for retryable failures (5xx, 429, network). */
  maxAttempts: number;
  /** First retry delay; doubles per try up to `maxBackoffMs`. A platform's Retry-After wins. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** How long a claim lasts: a connector that died mid-send frees its message after this. */
  claimMs: number;
  /** Deadline of one platform HTTP call. */
  requestTimeoutMs: number;
  /** How often the sweep looks for messages whose job was lost. */
  sweepMs: number;
  /** How long past due a queued message must be before the sweep enqueues it again. */
  sweepGraceMs: number;
  /** Tests substitute the HTTP client. */
  fetch: typeof fetch;
}

export const DEFAULT_CONNECTOR_OPTIONS: ConnectorOptions = {
  concurrency: 10,
  maxAttempts: 5,
  baseBackoffMs: 1000,
  maxBackoffMs: 60_000,
  claimMs: 120_000,
  requestTimeoutMs: 15_000,
  sweepMs: 15_000,
  sweepGraceMs: 30_000,
  fetch: globalThis.fetch,
};
