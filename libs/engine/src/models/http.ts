import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

/** The connection did not stand within the connect timeout. */
export class ConnectTimeoutError extends Error {
  readonly code = 'ECONNECTTIMEOUT';
  constructor(readonly timeoutMs: number) {
    super(`no connection within ${timeoutMs} ms`);
    this.name = 'ConnectTimeoutError';
  }
}

/** The request failed before the provider answered (refused, reset, unknown host, connect timeout). */
export class ProviderConnectionError extends Error {
  constructor(override readonly cause: Error) {
    super(`connection failed: ${cause.message}`);
    this.name = 'ProviderConnectionError';
  }
}

/** The provider answered with a status other than 2xx; `detail` is what its body says (key-free is the caller's job). */
export class ProviderStatusError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`HTTP ${status}${detail ? `: ${detail}` : ''}`);
    this.name = 'ProviderStatusError';
  }
}

/** An `error` object inside a 200 event stream, or an event that is not JSON. */
export class ProviderStreamError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'ProviderStreamError';
  }
}

/** How much of an error body is read (the rest is dropped with the connection). */
const MAX_ERROR_BODY = 64 * 1024;

export interface ProviderHttp {
  /**
   * POSTs a JSON body; resolves with the response once a 2xx head arrived, rejects with a
   * ProviderStatusError (other statuses, body read) or a ProviderConnectionError. Aborting
   * `signal` destroys the socket at once, so the provider sees the client go away.
   */
  postJson(url: URL, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<http.IncomingMessage>;
  /** Closes every pooled connection. */
  close(): void;
}

/**
 * The provider client's HTTP on node:http(s): keep-alive pools we can close, a connect timeout of
 * its own (apart from the wait for the first token, which the caller times), and the response as
 * a Node stream (no web streams in between: the openai SDK's path through them cost ~10 % of a
 * worker's CPU). No accept-encoding is sent, so nothing is decompressed.
 */
export function createProviderHttp(opts: { connectMs: number }): ProviderHttp {
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  const postJson = (url: URL, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<http.IncomingMessage> =>
    new Promise<http.IncomingMessage>((resolve, reject) => {
      const secure = url.protocol === 'https:';
      if (!secure && url.protocol !== 'http:') return reject(new ProviderConnectionError(new TypeError(`unsupported protocol ${url.protocol}`)));
      if (signal.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      const payload = Buffer.from(body, 'utf8');
      const req = (secure ? https : http).request(url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(payload.length) },
        agent: secure ? agents.https : agents.http,
        signal,
      });
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        reject(signal.aborted ? err : new ProviderConnectionError(err));
      };
      const timer = setTimeout(() => req.destroy(new ConnectTimeoutError(opts.connectMs)), opts.connectMs);
      req.once('socket', (socket: Socket) => {
        if (!socket.connecting) return clearTimeout(timer); // a pooled connection
        socket.once(secure ? 'secureConnect' : 'connect', () => clearTimeout(timer));
      });
      req.once('response', (res) => {
        clearTimeout(timer);
        const status = res.statusCode ?? 502;
        if (status >= 200 && status < 300) {
          settled = true;
          return resolve(res);
        }
        readBounded(res, MAX_ERROR_BODY).then(
          (text) => {
            settled = true;
            reject(new ProviderStatusError(status, errorDetail(text), retryAfterOf(res.headers)));
          },
          (err: Error) => fail(err),
        );
      });
      // `on`, not `once`: a request can fail again after the response began (the body's reader
      // sees that); a second 'error' without a listener would crash the process.
      req.on('error', (err) => {
        clearTimeout(timer);
        fail(err);
      });
      req.end(payload);
    });

  return {
    postJson,
    close: () => {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** Up to `max` bytes of a body as text; the connection is dropped when there is more. */
function readBounded(res: http.IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      if (size >= max) return;
      parts.push(chunk);
      size += chunk.length;
      if (size >= max) {
        res.destroy();
        resolve(Buffer.concat(parts).subarray(0, max).toString('utf8'));
      }
    });
    res.once('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    res.once('error', reject);
  });
}

/** What an error body says: OpenAI's `{error: {message}}`, other JSON as JSON, else the text. */
function errorDetail(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return '';
  let json: unknown;
  try {
    json = JSON.parse(trimmed);
  } catch {
    return trimmed;
  }
  const err = json && typeof json === 'object' && 'error' in json ? (json as { error: unknown }).error : json;
  const message = err && typeof err === 'object' ? (err as { message?: unknown }).message : undefined;
  if (typeof message === 'string') return message;
  return typeof err === 'string' ? err : JSON.stringify(err);
}

/** `retry-after-ms`, or `retry-after` in seconds or as a date; undefined when absent or unreadable. */
function retryAfterOf(headers: http.IncomingHttpHeaders): number | undefined {
  const ms = Number(headers['retry-after-ms']);
  if (Number.isFinite(ms) && ms > 0) return ms;
  const raw = headers['retry-after'];
  if (!raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

export interface SseMessage {
  event: string | null;
  data: string;
}

/** A line (or an event's data) longer than this ends the stream: a provider URL is user-supplied. */
const MAX_PENDING = 16 * 1024 * 1024;

/**
 * Server-sent events from text chunks as they arrive: `push` answers the messages the chunk
 * completed (comments and `id`/`retry` fields dropped), `end` whatever the last unterminated line
 * completes. Lines end in LF or CRLF. Synchronous on purpose: the caller's loop over the socket is
 * the only async layer.
 */
export class SseParser {
  #rest = '';
  #event: string | null = null;
  #data: string[] = [];
  #pending = 0;

  push(text: string): SseMessage[] {
    const buf = this.#rest.length > 0 ? this.#rest + text : text;
    const out: SseMessage[] = [];
    let start = 0;
    for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n', start)) {
      const end = nl > start && buf.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      this.#line(buf.slice(start, end), out);
      start = nl + 1;
    }
    this.#rest = start === 0 ? buf : buf.slice(start);
    if (this.#rest.length + this.#pending > MAX_PENDING) throw new ProviderStreamError('the provider sent an event over 16 MiB', false);
    return out;
  }

  end(): SseMessage[] {
    const out: SseMessage[] = [];
    if (this.#rest) this.#line(this.#rest.endsWith('\r') ? this.#rest.slice(0, -1) : this.#rest, out);
    this.#rest = '';
    this.#line('', out);
    return out;
  }

  #line(line: string, out: SseMessage[]): void {
    if (line === '') {
      if (this.#data.length > 0 || this.#event !== null) out.push({ event: this.#event, data: this.#data.join('\n') });
      this.#event = null;
      this.#data = [];
      this.#pending = 0;
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ':' a comment (keep-alive)
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') {
      this.#data.push(value);
      this.#pending += value.length;
    } else if (field === 'event') this.#event = value;
  }
}
