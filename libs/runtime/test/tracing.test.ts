import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { trace } from '@opentelemetry/api';
import { afterAll, describe, expect, it } from 'vitest';
import { contextFromTraceparent, createLogger, startTracing, stopTracing, tracedRoute, tracingEnabled, tracingRequested } from '../src/index.js';

/** Log lines written to memory, parsed. */
function memoryLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger({ service: 'test', level: 'info', destination }) };
}

const request = (headers: Record<string, unknown> = {}) => ({ headers, method: 'POST', url: '/api/v1/chat/completions?x=1' });

// Order matters: tracing is process-wide, so the "off" checks run before it is started.
describe('tracing', () => {
  const received: string[] = [];
  let hang = false;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (hang) return; // a collector that never answers: shutdown must still end at its deadline
      received.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('is requested only by an OTLP endpoint, and OTEL_SDK_DISABLED wins', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });

  it('off: no SDK, the route handler is the same function, log lines carry no trace fields', async () => {
    expect(await startTracing('test', {})).toBe(false);
    expect(tracingEnabled()).toBe(false);
    const handler = async () => 'ok';
    expect(tracedRoute('/x', handler)).toBe(handler);
    // The API's no-op tracer: spans are not recorded.
    expect(trace.getTracer('agentry').startSpan('x').isRecording()).toBe(false);
    const { lines, logger } = memoryLogger();
    logger.info('a line');
    logger.flush();
    await new Promise((r) => setTimeout(r, 20));
    expect(lines[0]).not.toHaveProperty('trace_id');
  });

  it('reads a W3C traceparent; a malformed or all-zero one starts a new trace', () => {
    const ctx = contextFromTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    expect(trace.getSpanContext(ctx!)).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true });
    expect(contextFromTraceparent('00-00000000000000000000000000000000-b7ad6b7169203331-01')).toBeUndefined();
    expect(contextFromTraceparent('garbage')).toBeUndefined();
    expect(contextFromTraceparent(['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'])).toBeUndefined();
  });

  it('on: a traced route continues the client trace, log lines in it name the span, shutdown flushes within its deadline', async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect(await startTracing('test', { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '60000' })).toBe(true);
    expect(tracingEnabled()).toBe(true);
    const { lines, logger } = memoryLogger();
    const traced = tracedRoute('/api/v1/chat/completions', async () => {
      logger.info('inside');
      return trace.getActiveSpan()!.spanContext();
    });
    const span = await traced(request({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }), { statusCode: 200 });
    expect(span.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    logger.flush();
    await new Promise((r) => setTimeout(r, 20));
    expect(lines.find((l) => l.msg === 'inside')).toMatchObject({ trace_id: span.traceId, span_id: span.spanId });
    // A client's mistake (an error with a 4xx status) is not a failed span; a server's is.
    const throwing = (status: number) => tracedRoute(`/s${status}`, async () => Promise.reject(Object.assign(new Error(`boom ${status}`), { status })));
    await expect(throwing(404)(request(), { statusCode: 200 })).rejects.toThrow('boom 404');
    await expect(throwing(500)(request(), { statusCode: 200 })).rejects.toThrow('boom 500');
    // The batch waits a minute; shutdown sends it.
    await stopTracing(5_000);
    expect(received.join('')).toContain('POST /api/v1/chat/completions');
    const spans = received.flatMap((b) => (JSON.parse(b) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string; status?: { code?: number } }> }> }> }).resourceSpans)
      .flatMap((r) => r.scopeSpans.flatMap((ss) => ss.spans));
    expect(spans.find((x) => x.name === 'POST /s404')?.status?.code ?? 0).toBe(0);
    expect(spans.find((x) => x.name === 'POST /s500')?.status?.code).toBe(2);
    expect(tracingEnabled()).toBe(false);

    // A collector that never answers: shutdown gives up at the deadline.
    hang = true;
    await startTracing('test', { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '60000' });
    await tracedRoute('/y', async () => 'ok')(request(), { statusCode: 200 });
    const started = Date.now();
    await stopTracing(300);
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
