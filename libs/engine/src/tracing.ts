import { context, trace, SpanStatusCode, type Attributes, type Span } from '@opentelemetry/api';

/**
 * The engine's spans, through the OpenTelemetry API only (the SDK is the service's business,
 * libs/runtime/src/tracing.ts). A span is made only inside a span being recorded (a traced run):
 * with tracing off there is none, and these cost one context read.
 */

/** Runs `fn` in a child span of the recorded active span (none: `fn` alone); a throw marks the span failed. */
export async function withChildSpan<T>(name: string, attributes: Attributes, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  const parent = trace.getActiveSpan();
  if (!parent || !parent.isRecording()) return fn(undefined);
  return trace.getTracer('agentry').startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      markSpanFailed(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** A child span of the recorded active span, for code that ends it itself (a stream); none when not traced. */
export function startChildSpan(name: string, attributes: Attributes): Span | undefined {
  const parent = trace.getActiveSpan();
  if (!parent || !parent.isRecording()) return undefined;
  return trace.getTracer('agentry').startSpan(name, { attributes }, context.active());
}

export function markSpanFailed(span: Span, err: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  if (err instanceof Error) span.recordException(err);
}
