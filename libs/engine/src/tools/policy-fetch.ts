import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { assertPublicAddress, policyLookup, type AddressPolicy } from './net-policy.js';

/** The `fetch` shape SDKs accept as an option (the MCP client's `FetchLike`). */
type PolicyFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** Statuses whose Response must have no body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

function bodyOf(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (body instanceof URLSearchParams) return body.toString();
  throw new TypeError('policyFetch sends string or byte bodies only');
}

/**
 * A `fetch` under the outbound-address policy (`net-policy.ts`) for libraries that take one (the
 * MCP client): each request checks the URL first (scheme, literal addresses, what the name
 * resolves to now), then connects through `policyLookup`, so the address actually dialled is
 * judged too and a DNS answer that changed in between (rebinding) is refused. No connection
 * pooling (a pooled socket would skip the check) and no redirects: a 3xx comes back as it is,
 * and a caller that follows it calls this function again.
 */
export function policyFetch(policy: AddressPolicy): PolicyFetch {
  return async (input, init = {}) => {
    const url = await assertPublicAddress(input instanceof URL ? input : new URL(String(input)), policy);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const body = bodyOf(init.body);
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const client = url.protocol === 'https:' ? https : http;
    const signal = init.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      const req = client.request(
        url,
        { method: init.method ?? 'GET', headers, agent: false, lookup: policyLookup(policy), ...(signal ? { signal } : {}) },
        (res) => {
          // A hostile server can send what Response refuses (a status of 999, a header value it rejects).
          try {
            const status = res.statusCode ?? 502;
            const responseHeaders = new Headers();
            for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
            const init = { status, statusText: res.statusMessage ?? '', headers: responseHeaders };
            if (NULL_BODY.has(status)) {
              res.resume();
              resolve(new Response(null, init));
              return;
            }
            // Node's web stream and the DOM one are the same object at run time; only the types differ.
            resolve(new Response(Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>, init));
          } catch (err) {
            res.destroy();
            reject(err as Error);
          }
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  };
}
