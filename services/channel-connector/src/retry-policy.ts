import { AccountConfigError, PlatformError, UnsupportedOperationError } from '@agentry/channels';
import { MediaError } from './media.js';

export interface RetryPolicy {
  /** Tries per message, the first included, for retryable failures (5xx, 429, network). */
  maxAttempts: number;
  /** First retry delay; doubles per try up to `maxBackoffMs`. A platform's Retry-After wins. */
  baseBackoffMs: number;
  maxBackoffMs: number;
}

/** Whether a send that threw after `attempts` tries is tried again: retryable platform failures, until the tries run out. */
export function shouldRetry(policy: RetryPolicy, err: unknown, attempts: number): err is PlatformError {
  return err instanceof PlatformError && err.retryable && attempts < policy.maxAttempts;
}

/** How long until the next try: the backoff doubling per try up to its cap, or the platform's Retry-After when that is longer. */
export function retryDelayMs(policy: RetryPolicy, attempts: number, retryAfterMs: number | undefined): number {
  const backoff = Math.min(policy.maxBackoffMs, policy.baseBackoffMs * 2 ** (attempts - 1));
  return Math.max(retryAfterMs ?? 0, backoff);
}

/**
 * The error a message that is not tried again is failed with, for the failures a platform or an
 * account can cause; undefined for anything else (a bug of ours, logged as such).
 */
export function finalError(err: unknown, attempts: number): string | undefined {
  if (err instanceof PlatformError || err instanceof UnsupportedOperationError || err instanceof AccountConfigError || err instanceof MediaError) {
    return err instanceof PlatformError && err.retryable ? `${err.message} (gave up after ${attempts} tries)` : err.message;
  }
  return undefined;
}
