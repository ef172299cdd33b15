import Type from 'typebox';
import { AUTHORITY } from '../authority/policy.js';
import { defineNodeSpec } from './types.js';

/** The `restApiCall` node as a definition holds it; what it does is the engine's `nodes/rest-api-call.ts`. */
export const restApiCallSpec = defineNodeSpec({
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
    allowPrivateNetworks: Type.Optional(Type.Boolean({ description: 'allow loopback, private and link-local addresses (default false), as for http_fetch; admin-only', ...AUTHORITY })),
    allowHosts: Type.Optional(Type.Array(Type.String(), { description: 'hosts allowed whatever they resolve to; "*.example.com" matches subdomains; admin-only', ...AUTHORITY })),
    maxParallelRequestsCount: Type.Optional(Type.Integer({ minimum: 0, description: 'parallel calls of this node per host (default 2000, 0 unlimited); more wait' })),
  }, { additionalProperties: false }),
  capabilities: (config) => [{ kind: 'request', via: 'restApiCall', allowPrivateNetworks: config.allowPrivateNetworks === true, allowHosts: config.allowHosts ?? [] }],
});
