import { restApiCall } from '../../nodes/rest-api-call.js';
import { outboundRequest, safeUrl } from '../http-request.js';
import { renderTemplate } from '../placeholders.js';
import { NodeFailure, defineExecutor } from '../types.js';

/** `readTimeoutMs` when absent or 0. */
export const REST_DEFAULT_TIMEOUT_MS = 30_000;

/**
 * An HTTP call (RuleGo's `restApiCall`): `restEndpointUrlPattern` and header values are
 * templates (`${metadata.x}`, `${msg.x}`); the body is the message data (none for GET, HEAD or
 * `withoutRequestBody`); `requestMethod` defaults to POST, `readTimeoutMs` to 30 s. The
 * response body becomes the data, `metadata.status` the status line (`200 OK`) and
 * `metadata.statusCode` the code. 2xx: Success; anything else: Failure with that message.
 * Outbound addresses follow `ctx.http` (public only by default).
 */
export const restApiCallExecutor = defineExecutor(restApiCall, async (msg, config, ctx) => {
  const method: string = config.requestMethod ?? 'POST';
  const url = renderTemplate(config.restEndpointUrlPattern, msg);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(config.headers ?? {})) headers[k.toLowerCase()] = renderTemplate(v, msg);
  const withBody = !config.withoutRequestBody && method !== 'GET' && method !== 'HEAD';
  if (withBody && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const res = await outboundRequest({
    url,
    method,
    headers,
    ...(withBody ? { body: msg.data } : {}),
    timeoutMs: config.readTimeoutMs || REST_DEFAULT_TIMEOUT_MS,
    signal: ctx.signal,
    policy: ctx.http ?? {},
  });
  const out = {
    ...msg,
    data: res.body,
    metadata: { ...msg.metadata, status: `${res.status} ${res.statusText}`.trim(), statusCode: String(res.status) },
  };
  if (res.status >= 200 && res.status < 300) return { msg: out, relation: 'Success' };
  throw new NodeFailure(`${method} ${safeUrl(new URL(url))} answered ${out.metadata.status}`, out);
});
