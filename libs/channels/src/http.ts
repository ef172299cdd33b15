import { PlatformError, type AdapterIo } from './adapter.js';

export interface PlatformResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: unknown;
  text: string;
}

/**
 * One HTTP call to a platform with the io's deadline. Network errors and timeouts become a
 * retryable PlatformError (status 0); any HTTP answer is returned as is for the adapter to judge
 * (platforms report errors in 200 bodies too). `what` names the call in error messages; URLs are
 * never put in messages because some platforms carry the token in the path.
 */
export async function callPlatform(io: AdapterIo, what: string, url: string, init: RequestInit): Promise<PlatformResponse> {
  let res: Response;
  try {
    res = await io.fetch(url, { ...init, signal: AbortSignal.timeout(io.timeoutMs) });
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    throw new PlatformError(timedOut ? `${what}: no answer within ${io.timeoutMs} ms` : `${what}: ${describeNetworkError(err)}`, {
      status: 0,
      retryable: true,
      cause: err,
    });
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Milliseconds from a Retry-After header (seconds or an HTTP date), or undefined. */
export function retryAfterMs(headers: Headers, now: number): number | undefined {
  const value = headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The error for a non-2xx HTTP answer: 429 and 5xx are retryable (with Retry-After when given),
 * other 4xx are not. `detail` is the platform's own description of the failure.
 */
export function httpError(what: string, res: PlatformResponse, io: AdapterIo, detail?: string): PlatformError {
  const retryable = res.status === 429 || res.status >= 500;
  const message = `${what}: HTTP ${res.status}${detail ? `: ${detail}` : ''}`;
  const after = retryAfterMs(res.headers, io.now());
  return new PlatformError(message, after === undefined ? { status: res.status, retryable } : { status: res.status, retryable, retryAfterMs: after });
}

function describeNetworkError(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? `network error (${code})` : 'network error';
}
