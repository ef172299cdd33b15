/** One readable line for any thrown value (pg's refused connections are AggregateErrors with no message). */
export function describeError(err: unknown): string {
  if (err instanceof AggregateError && !err.message && err.errors.length > 0) {
    return describeError(err.errors[0]);
  }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    if (err.message) return err.message;
    return typeof code === 'string' ? code : err.name;
  }
  return String(err);
}

/** SQLSTATEs of a server that is gone or not taking connections (class 08, shutdown, starting up, full). */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
// pg's own messages when a connection broke or could not be made in time (no code on these).
const UNAVAILABLE_MESSAGE = /Connection terminated|timeout exceeded when trying to connect|not queryable|Client was closed|connection error/i;

/**
 * Did this fail because the database could not be reached (restart, failover, network), rather
 * than because of the query? Such a failure says nothing about the data: the same statement may
 * succeed once the server is back, so callers retry it or answer 503.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof AggregateError && err.errors.length > 0) return err.errors.some((e) => isDatabaseUnavailable(e));
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || NETWORK_CODES.has(code))) return true;
  if (UNAVAILABLE_MESSAGE.test(err.message)) return true;
  return err.cause !== undefined && err.cause !== err && isDatabaseUnavailable(err.cause);
}
