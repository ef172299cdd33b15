import { context, trace, SpanKind, SpanStatusCode, TraceFlags, type Context, type Span, type SpanOptions } from '@opentelemetry/api';

/**
 * OpenTelemetry tracing, off unless the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Off, the SDK is never loaded: the API's no-op
 * tracer answers, the logger gets no mixin and the traced routes are the plain handlers, so the
 * chat path does no extra work. On, spans go over OTLP/HTTP (JSON) in batches; shutdown flushes
 * them within the service's deadline.
 */

interface Flushable {
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

let provider: Flushable | undefined;

/** The tracer every part of Agentry names its spans with. */
export const TRACER_NAME = 'agentry';

export function tracingEnabled(): boolean {
  return provider !== undefined;
}

/** True when the environment asks for traces (an OTLP endpoint is set and the SDK is not disabled). */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (String(env.OTEL_SDK_DISABLED ?? '').toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts tracing for this process when the environment asks for it; first thing in each main
 * (before the logger exists, which reads `tracingEnabled()`). Idempotent: embedded mode starts it once.
 */
export async function startTracing(service: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  if (provider) return true;
  if (!tracingRequested(env)) return false;
  // Loaded only here: a process without an endpoint never loads the SDK.
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }, { AsyncLocalStorageContextManager }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/context-async-hooks'),
  ]);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const tracerProvider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || `agentry-${service}` }),
    // The endpoint as the OTLP spec says (the traces one as is, the general one + /v1/traces);
    // headers and timeout the exporter reads from the standard OTEL_EXPORTER_OTLP_* variables.
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl(env) }), { scheduledDelayMillis: Number(env.OTEL_BSP_SCHEDULE_DELAY) || 1000 })],
  });
  trace.setGlobalTracerProvider(tracerProvider);
  provider = tracerProvider;
  return true;
}

function tracesUrl(env: NodeJS.ProcessEnv): string {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  return `${String(env.OTEL_EXPORTER_OTLP_ENDPOINT).replace(/\/+$/, '')}/v1/traces`;
}

/** Sends the spans still buffered and stops the SDK, giving up at the deadline. */
export async function stopTracing(deadlineMs: number): Promise<void> {
  const p = provider;
  if (!p) return;
  provider = undefined;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, deadlineMs));
  });
  await Promise.race([p.shutdown().catch(() => undefined), timeout]);
  clearTimeout(timer);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a W3C `traceparent` names (invalid or all-zero ids: none, and a new trace starts). */
export function contextFromTraceparent(traceparent: unknown, base: Context = context.active()): Context | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const m = TRACEPARENT.exec(traceparent.trim().toLowerCase());
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return undefined;
  const flags = parseInt(m[3]!, 16) & TraceFlags.SAMPLED;
  return trace.setSpanContext(base, { traceId: m[1]!, spanId: m[2]!, traceFlags: flags, isRemote: true });
}

/** `trace_id` and `span_id` of the active span, for the logger's mixin. */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** Marks a span failed with the error's message. */
export function failSpan(span: Span, err: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  if (err instanceof Error) span.recordException(err);
}

/** Runs `fn` in a new active span (parent: `parent`, else the active one), ended when `fn` settles; a throw marks it failed. */
export async function inSpan<T>(name: string, opts: SpanOptions & { parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  const tracer = trace.getTracer(TRACER_NAME);
  const { parent, ...spanOpts } = opts;
  return tracer.startActiveSpan(name, spanOpts, parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * A fastify route handler traced as a SERVER span, honouring the client's `traceparent` (else
 * a trace starts). With tracing off it is the handler itself, unchanged.
 */
export function tracedRoute<Req extends { headers: Record<string, unknown>; method: string; url: string }, Rep extends { statusCode: number }, R>(
  route: string,
  handler: (req: Req, reply: Rep) => Promise<R>,
): (req: Req, reply: Rep) => Promise<R> {
  if (!tracingEnabled()) return handler;
  return (req, reply) => {
    const parent = contextFromTraceparent(req.headers.traceparent) ?? trace.deleteSpan(context.active());
    const attributes = { 'http.request.method': req.method, 'http.route': route, 'url.path': req.url.split('?')[0] ?? '' };
    const tracer = trace.getTracer(TRACER_NAME);
    return tracer.startActiveSpan(`${req.method} ${route}`, { kind: SpanKind.SERVER, attributes }, parent, async (span) => {
      try {
        const result = await handler(req, reply);
        span.setAttribute('http.response.status_code', reply.statusCode);
        return result;
      } catch (err) {
        // The client's mistakes (an AppError of 4xx) are answered, not failures of the server.
        const status = (err as { status?: unknown }).status;
        if (typeof status === 'number') span.setAttribute('http.response.status_code', status);
        if (typeof status !== 'number' || status >= 500) failSpan(span, err);
        throw err;
      } finally {
        span.end();
      }
    });
  };
}
