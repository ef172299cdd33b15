import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';

const DONE = Buffer.from('data: [DONE]');
const sawDoneOf = new WeakMap<Response, { done: boolean }>();

/**
 * Whether an event-stream response carried `data: [DONE]` (undefined: not an event stream of
 * this fetch). The openai SDK ends its iteration the same way whether [DONE] came or the server
 * just closed the response; a caller that must tell a cut-off answer from a finished one asks here.
 */
export function sawDone(response: Response): boolean | undefined {
  return sawDoneOf.get(response)?.done;
}

/** Looks for `data: [DONE]` in the bytes as they pass (a look at each chunk and its seam with the last). */
function watchForDone(res: http.IncomingMessage, response: Response): void {
  const state = { done: false };
  sawDoneOf.set(response, state);
  let tail: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    const seam = tail.length > 0 ? Buffer.concat([tail, chunk.subarray(0, DONE.length - 1)]) : undefined;
    if (chunk.includes(DONE) || seam?.includes(DONE)) {
      state.done = true;
      res.removeListener('data', onData);
      return;
    }
    tail = chunk.subarray(Math.max(0, chunk.length - (DONE.length - 1)));
  };
  res.on('data', onData);
}

/** The connection did not stand within the connect timeout. */
export class ConnectTimeoutError extends Error {
  readonly code = 'ECONNECTTIMEOUT';
  constructor(readonly timeoutMs: number) {
    // Worded without "timed out": the openai SDK would otherwise replace it by its generic
    // "Request timed out." and drop the cause.
    super(`no connection within ${timeoutMs} ms`);
    this.name = 'ConnectTimeoutError';
  }
}

export interface ProviderFetch {
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Closes every pooled connection. */
  close(): void;
}

/**
 * A `fetch` for the openai SDK on node:http(s), for what the built-in fetch cannot do: a connect
 * timeout of its own (separate from the wait for the first token, which the caller times), and
 * keep-alive pools we can close. Requests abort through `init.signal` at once (the socket is
 * destroyed, so the provider sees the client go away). Bodies are strings or bytes (the SDK
 * sends JSON); responses are not decompressed (no accept-encoding is sent).
 */
export function createProviderFetch(opts: { connectMs: number }): ProviderFetch {
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  const fetchImpl = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      const secure = url.protocol === 'https:';
      if (!secure && url.protocol !== 'http:') return reject(new TypeError(`unsupported protocol ${url.protocol}`));
      const signal = init.signal ?? undefined;
      if (signal?.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));

      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, key) => {
        headers[key] = value;
      });
      let payload: Buffer | undefined;
      if (typeof init.body === 'string') payload = Buffer.from(init.body, 'utf8');
      else if (init.body instanceof Uint8Array) payload = Buffer.from(init.body);
      else if (init.body instanceof ArrayBuffer) payload = Buffer.from(init.body);
      else if (init.body != null) return reject(new TypeError('this fetch sends string or byte bodies only'));
      if (payload) headers['content-length'] = String(payload.length);

      const req = (secure ? https : http).request(url, {
        method: (init.method ?? 'GET').toUpperCase(),
        headers,
        agent: secure ? agents.https : agents.http,
        signal,
      });
      let settled = false;
      const timer = setTimeout(() => req.destroy(new ConnectTimeoutError(opts.connectMs)), opts.connectMs);
      req.once('socket', (socket: Socket) => {
        if (!socket.connecting) return clearTimeout(timer); // a pooled connection
        socket.once(secure ? 'secureConnect' : 'connect', () => clearTimeout(timer));
      });
      req.once('response', (res) => {
        clearTimeout(timer);
        settled = true;
        const h = new Headers();
        for (const [key, value] of Object.entries(res.headers)) {
          if (Array.isArray(value)) for (const v of value) h.append(key, v);
          else if (value !== undefined) h.set(key, value);
        }
        const status = res.statusCode ?? 502;
        const empty = status === 204 || status === 304 || req.method === 'HEAD';
        if (empty) res.resume();
        const body = empty ? null : (Readable.toWeb(res) as WebReadableStream<Uint8Array> as unknown as ReadableStream<Uint8Array>);
        const response = new Response(body, { status, statusText: res.statusMessage ?? '', headers: h });
        if (!empty && /text\/event-stream/i.test(res.headers['content-type'] ?? '')) watchForDone(res, response);
        resolve(response);
      });
      // `on`, not `once`: a request can fail again after the response began (the body stream
      // reports that to its reader); a second 'error' without a listener would crash the process.
      req.on('error', (err) => {
        clearTimeout(timer);
        if (!settled) {
          settled = true;
          reject(err);
        }
      });
      req.end(payload);
    });

  return {
    fetch: fetchImpl,
    close: () => {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
