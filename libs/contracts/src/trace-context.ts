import { trace, TraceFlags } from '@opentelemetry/api';

/** A W3C `traceparent` (version 00), as the queue payloads carry it. */
export const TRACEPARENT_PATTERN = '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$';

/**
 * The W3C `traceparent` of the active span when one is being recorded (tracing on and inside a
 * span), for a job to carry; else undefined, and the job stays at its untraced version.
 */
export function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  if (!span || !span.isRecording()) return undefined;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-0${traceFlags & TraceFlags.SAMPLED}`;
}
