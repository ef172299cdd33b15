import Type from 'typebox';
import { outboundRequest, safeUrl } from '../chain/http-request.js';
import { renderTemplate } from '../chain/placeholders.js';
import { NodeFailure } from '../chain/types.js';
import { defineNodeType } from './types.js';

/** `readTimeoutMs` when absent or 0. */
const REST_DEFAULT_TIMEOUT_MS = 30_000;

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
 * (the switches of http_fetch) or `ctx.http` open more.
 */
export const restApiCall = defineNodeType({
  type: 'restApiCall',
  description: 'calls an HTTP endpoint',
  configuration: Type.Object({
    restEndpointUrlPattern: Type.String({ minLength: 1, description: 'URL; ${...} placeholders allowed' }),
    requestMethod: Type.Optional(
      Type.Union(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].map((m) => Type.Literal(m))),
    ),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    withoutRequestBody: Type.Optional(Type.Boolean()),
    readTimeoutMs: Type.Optional(Type.Integer({ minimum: 0 })),
    allowPrivateNetworks: Type.Optional(Type.Boolean({ description: 'allow loopback, private and link-local addresses (default false), as for http_fetch' })),
    allowHosts: Type.Optional(Type.Array(Type.String(), { description: 'hosts allowed whatever they resolve to; "*.example.com" matches subdomains' })),
  }, { additionalProperties: false }),
  async execute(msg, config, ctx) {
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
      policy: {
        allowPrivateNetworks: config.allowPrivateNetworks ?? ctx.http?.allowPrivateNetworks ?? false,
        allowHosts: [...(ctx.http?.allowHosts ?? []), ...(config.allowHosts ?? [])],
      },
    }).catch((err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      throw new NodeFailure(reason, { ...msg, metadata: { ...msg.metadata, errorBody: reason } }, { cause: err });
    });
    const metadata = { ...msg.metadata, status: `${res.status} ${res.statusText}`.trim(), statusCode: String(res.status) };
    if (res.status === 200) return { msg: { ...msg, data: res.body, metadata }, relation: 'Success' };
    const failed = { ...msg, metadata: { ...metadata, errorBody: res.body } };
    throw new NodeFailure(`${method} ${safeUrl(new URL(url))} answered ${metadata.status}`, failed);
  },
});
