import { restApiCallSpec } from '@agentry/definitions';
import { outboundRequest, safeUrl, type OutboundResponse } from '../chain/http-request.js';
import { KeyedLimiter } from '../chain/limiter.js';
import { renderTemplate } from '../chain/placeholders.js';
import { NodeFailure } from '../chain/types.js';
import { defineNodeType } from './types.js';

/** `readTimeoutMs` when absent or 0. */
const REST_DEFAULT_TIMEOUT_MS = 30_000;
/** RuleGo's default `maxParallelRequestsCount`. */
const REST_DEFAULT_MAX_PARALLEL = 2000;

/** The parallel calls of each restApiCall node to each host, in this process. */
export const restApiCallLimiter = new KeyedLimiter();

/**
 * An HTTP call (RuleGo's `restApiCall` and field names): `restEndpointUrlPattern` and header
 * values are templates (`${metadata.x}`, `${msg.x}`); the body is the message data (none for
 * GET, HEAD or `withoutRequestBody`); `requestMethod` defaults to POST, `readTimeoutMs` to 30 s.
 * `metadata.status` is the status line (`200 OK`) and `metadata.statusCode` the code. As in
 * RuleGo, only 200 is Success, with the response body as the data; any other status (201 and
 * 204 included) goes along Failure with the data unchanged and the response body in
 * `metadata.errorBody`; a call that gets no answer (refused address, timeout) goes along Failure
 * with the reason in `metadata.errorBody`.
 * Outbound addresses are public only unless the node's `allowPrivateNetworks`/`allowHosts`
 * (the switches of http_fetch) or `ctx.http` open more. `maxParallelRequestsCount` (default
 * 2000, 0 unlimited) is RuleGo's: its node's own HTTP client opens at most that many
 * connections per host, so more calls wait; here the node's calls to one host in this worker
 * process wait for a slot the same way (the wait counts in the timeout).
 */
export const restApiCall = defineNodeType({
  ...restApiCallSpec,
  async execute(msg, config, ctx) {
    const method: string = config.requestMethod ?? 'POST';
    const url = renderTemplate(config.restEndpointUrlPattern, msg);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(config.headers ?? {})) headers[k.toLowerCase()] = renderTemplate(v, msg);
    const withBody = !config.withoutRequestBody && method !== 'GET' && method !== 'HEAD';
    if (withBody && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
    const timeoutMs = config.readTimeoutMs || REST_DEFAULT_TIMEOUT_MS;
    const limit = config.maxParallelRequestsCount ?? REST_DEFAULT_MAX_PARALLEL;
    const res = await limited(`${ctx.chain.id}\0${ctx.node.id}\0${hostOf(url)}`, limit, ctx.signal, timeoutMs, (remainingMs) =>
      outboundRequest({
        url,
        method,
        headers,
        ...(withBody ? { body: msg.data } : {}),
        timeoutMs: remainingMs,
        statedTimeoutMs: timeoutMs,
        signal: ctx.signal,
        policy: {
          allowPrivateNetworks: config.allowPrivateNetworks ?? ctx.http?.allowPrivateNetworks ?? false,
          allowHosts: [...(ctx.http?.allowHosts ?? []), ...(config.allowHosts ?? [])],
        },
      }),
    ).catch((err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      throw new NodeFailure(reason, { ...msg, metadata: { ...msg.metadata, errorBody: reason } }, { cause: err });
    });
    const metadata = { ...msg.metadata, status: `${res.status} ${res.statusText}`.trim(), statusCode: String(res.status) };
    if (res.status === 200) return { msg: { ...msg, data: res.body, metadata }, relation: 'Success' };
    const failed = { ...msg, metadata: { ...metadata, errorBody: res.body } };
    throw new NodeFailure(`${method} ${safeUrl(new URL(url))} answered ${metadata.status}`, failed);
  },
});

/** Runs `call` in one of `limit` slots of `key` (0: no limit) with the time the wait left. */
async function limited(key: string, limit: number, signal: AbortSignal, timeoutMs: number, call: (remainingMs: number) => Promise<OutboundResponse>): Promise<OutboundResponse> {
  if (limit === 0) return call(timeoutMs);
  const started = Date.now();
  const release = await restApiCallLimiter.acquire(key, limit, signal, timeoutMs);
  try {
    return await call(Math.max(1, timeoutMs - (Date.now() - started)));
  } finally {
    release();
  }
}

/** The host a call goes to (the URL as written when it does not parse: the request reports that). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
