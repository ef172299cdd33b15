import Type from 'typebox';
import { defineNodeType } from './types.js';

/** An HTTP call (RuleGo's field names). Private addresses are refused unless configured. */
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
  }),
});
