import http from 'node:http';
import https from 'node:https';
import { assertPublicAddress, policyLookup, type AddressPolicy } from '../tools/net-policy.js';

export interface OutboundRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  /** The timeout a person set, named in the error when `timeoutMs` is what is left of it after a wait. */
  statedTimeoutMs?: number;
  signal: AbortSignal;
  policy: AddressPolicy;
  /** Longer response bodies fail the request. Default 10 MiB. */
  maxResponseBytes?: number;
}

export interface OutboundResponse {
  status: number;
  statusText: string;
  body: string;
}

export class OutboundRequestError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OutboundRequestError';
  }
}

/** The URL without query, fragment and credentials: safe for error messages and logs. */
export function safeUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * One HTTP(S) request under the outbound-address policy (`tools/net-policy.ts`): the URL must be
 * http(s) and its host public, named in `allowHosts`, or `allowPrivateNetworks` set. Literal
 * addresses are judged before connecting; names are judged again by the socket's `lookup`,
 * and the connection goes to exactly the address that lookup checked, so a second DNS answer
 * (rebinding) cannot swap it. No connection pooling (a pooled socket would skip the check) and
 * no redirects (a 3xx is returned as it is).
 */
export async function outboundRequest(req: OutboundRequest): Promise<OutboundResponse> {
  const url = await assertPublicAddress(req.url, req.policy);
  const maxBytes = req.maxResponseBytes ?? 10 * 1024 * 1024;
  const signal = req.timeoutMs > 0 ? AbortSignal.any([req.signal, AbortSignal.timeout(req.timeoutMs)]) : req.signal;
  const client = url.protocol === 'https:' ? https : http;
  const headers: Record<string, string> = { ...req.headers };
  if (req.body !== undefined) headers['content-length'] = String(Buffer.byteLength(req.body));

  return new Promise<OutboundResponse>((resolve, reject) => {
    const fail = (err: unknown) => {
      if (signal.aborted) {
        const timedOut = !req.signal.aborted;
        reject(new OutboundRequestError(timedOut ? `${req.method} ${safeUrl(url)} timed out after ${req.statedTimeoutMs ?? req.timeoutMs} ms` : `${req.method} ${safeUrl(url)} was cancelled`));
        return;
      }
      const e = err as NodeJS.ErrnoException;
      if (e.name === 'AddressNotAllowedError') reject(e);
      else reject(new OutboundRequestError(`${req.method} ${safeUrl(url)} failed: ${e.code ?? e.message}`, { cause: err }));
    };
    const request = client.request(
      url,
      { method: req.method, headers, agent: false, lookup: policyLookup(req.policy), signal },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            res.destroy();
            reject(new OutboundRequestError(`${req.method} ${safeUrl(url)}: the response is larger than ${maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', fail);
      },
    );
    request.on('error', fail);
    request.end(req.body);
  });
}
