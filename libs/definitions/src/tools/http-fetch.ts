import Type from 'typebox';
import { StringEnum } from './schema.js';
import { AUTHORITY } from '../authority/policy.js';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 8192, description: 'the http:// or https:// URL to fetch' }),
    method: Type.Optional(
      StringEnum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'], { description: 'HTTP method (default GET)' }),
    ),
    headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'request headers, e.g. {"accept": "application/json"}' })),
    body: Type.Optional(Type.String({ description: 'request body (POST, PUT, PATCH, DELETE)' })),
    raw: Type.Optional(Type.Boolean({ description: 'return HTML as it is instead of as extracted text (default false)' })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  allowPrivateNetworks: Type.Optional(Type.Boolean({ description: 'allow loopback, private and link-local addresses (default false; admin-only)', ...AUTHORITY })),
  allowHosts: Type.Optional(Type.Array(Type.String(), { description: 'hosts allowed whatever they resolve to; "*.example.com" matches subdomains (admin-only)', ...AUTHORITY })),
  timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 600, description: 'seconds for the whole fetch, redirects included (default 30)' })),
  maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1, description: 'bytes of the body read (default 1048576); the rest is cut' })),
  maxOutputChars: Type.Optional(Type.Integer({ minimum: 100, description: 'characters of the body returned (default 100000)' })),
  maxRedirects: Type.Optional(Type.Integer({ minimum: 0, maximum: 20, description: 'redirects followed (default 5), each checked against the policy' })),
});

/** The `httpFetch` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const httpFetchSpec = defineToolSpec({
  name: 'http_fetch',
  description:
    'Fetch a URL over HTTP(S) and return the status, the content type and the body (HTML as readable text unless raw is true). ' +
    'Only public internet addresses are reachable unless the agent\'s configuration allows more. Redirects are followed.',
  parameters: Parameters,
  configSchema: Config,
  optIn: true,
});
