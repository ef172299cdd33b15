import { InboundParseError, PlatformError } from './adapter.js';

/** `value` as a JSON object, or undefined for anything else (arrays included). */
export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The parsed JSON of an inbound body; a body that is not JSON fails as `notJson` (answered 400). */
export function parseInboundJson(rawBody: Buffer, notJson: string): unknown {
  try {
    return JSON.parse(rawBody.toString('utf8'));
  } catch {
    throw new InboundParseError(notJson);
  }
}

/**
 * A field a successful platform answer must carry, as a non-empty string. Without it the answer
 * is useless to us, and asking again would not change it.
 */
export function requireString(value: unknown, what: string, field: string): string {
  if (typeof value === 'string' && value) return value;
  throw new PlatformError(`${what}: the answer carries no ${field}`, { status: 200, retryable: false });
}
