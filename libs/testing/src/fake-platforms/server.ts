import http from 'node:http';
import { type AddressInfo } from 'node:net';
import type { FakeCall, FakeFailure } from './types.js';

/**
 * The HTTP plumbing every fake platform shares: listening on a free loopback port, reading bodies,
 * recording calls and queueing injected failures. What a platform answers stays in its own file.
 */

/** Answers one request; `body` is the whole request body. */
export type FakeHandler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, body: Buffer) => void | Promise<void>;

/** A fake's routes by `METHOD /path`, for platforms whose paths are fixed. */
export type FakeRoutes = Record<string, FakeHandler>;

/** The route `req` asks for, if the table has it. */
export function findRoute(routes: FakeRoutes, req: http.IncomingMessage, url: URL): FakeHandler | undefined {
  return Object.hasOwn(routes, `${req.method} ${url.pathname}`) ? routes[`${req.method} ${url.pathname}`] : undefined;
}

export interface FakeServerOptions {
  handle: FakeHandler;
  /** Answers, in the platform's own error shape, a request the fake itself failed on. */
  crashed(res: http.ServerResponse, message: string): void;
  /**
   * Replacements applied before a call is recorded, for platforms that carry a token or secret in
   * the path, the query or a header: tests print calls, and a fake must not leak what it checks.
   */
  mask?: { path?(path: string): string; query?: Record<string, string>; headers?: Record<string, string> };
  /** A larger body fails the request (as the platform refuses it); default: no limit. */
  maxBodyBytes?: number;
}

export interface FakeServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  calls: FakeCall[];
  /** Queues `failure` as the answer to the next `count` calls that take one. */
  failNext(count: number, failure: FakeFailure): void;
  /** The failure this call is to answer with, if one is queued (taking it uses it up). */
  nextFailure(): FakeFailure | undefined;
  close(): Promise<void>;
}

export async function startFakeServer(opts: FakeServerOptions): Promise<FakeServer> {
  const calls: FakeCall[] = [];
  const failures: FakeFailure[] = [];

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake.invalid');
    calls.push(recordedCall(req, url, opts.mask));
    readBody(req, opts.maxBodyBytes)
      .then((body) => opts.handle(req, res, url, body))
      .catch((err: unknown) => {
        if (res.headersSent) res.destroy();
        else opts.crashed(res, err instanceof Error ? err.message : String(err));
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });

  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    failNext(count, failure) {
      for (let i = 0; i < count; i++) failures.push(failure);
    },
    nextFailure: () => failures.shift(),
    close() {
      return new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

function recordedCall(req: http.IncomingMessage, url: URL, mask: FakeServerOptions['mask'] = {}): FakeCall {
  const query: Record<string, string> = {};
  for (const [name, value] of url.searchParams) query[name] = mask.query?.[name] ?? value;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = mask.headers?.[name] ?? (Array.isArray(value) ? value.join(', ') : value);
  }
  return { method: req.method ?? 'GET', path: mask.path ? mask.path(url.pathname) : url.pathname, query, headers };
}

async function readBody(req: http.IncomingMessage, maxBytes = Infinity): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export function answerJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  contentType = 'application/json; charset=utf-8',
): void {
  answerText(res, status, JSON.stringify(body), contentType, headers);
}

export function answerText(res: http.ServerResponse, status: number, text: string, contentType: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The Retry-After header an injected failure asks for, if any. */
export function retryAfterHeaders(failure: FakeFailure): Record<string, string> {
  return failure.retryAfterSeconds === undefined ? {} : { 'retry-after': String(failure.retryAfterSeconds) };
}

/** A request body as a JSON object, or undefined when it is not one. */
export function parseJsonObject(raw: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(raw.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A multipart (or urlencoded) request body, parsed as fetch parses forms; rejects anything else. */
export function readForm(req: http.IncomingMessage, raw: Buffer): Promise<FormData> {
  return new Request('http://fake.invalid/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body: raw }).formData();
}
