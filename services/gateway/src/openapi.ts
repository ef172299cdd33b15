import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifySchema } from 'fastify';
import swagger, { type SwaggerTransform } from '@fastify/swagger';
import { ErrorBody, OpenAIErrorBody } from '@agentry/contracts';
import type { Access } from './auth/auth.js';

/**
 * `GET /api/v1/openapi.json`: the OpenAPI 3 document of every route, produced by @fastify/swagger
 * from the schemas the routes declare (TypeBox): the bodies they validate and the answers they
 * serialize (`schema.response`, written once in `@agentry/contracts`). It describes routes, never
 * data. What a route cannot declare as a validation schema (multipart uploads, raw webhook
 * bodies, the open `PUT /config` patch) it declares for the document alone with `documentBody`.
 */

export const OPENAPI_PATH = '/api/v1/openapi.json';

const TAGS: Array<{ name: string; description: string; match: RegExp }> = [
  { name: 'probes', description: 'liveness, readiness and metrics (no prefix, no authentication)', match: /^\/(health|ready|metrics)$/ },
  { name: 'meta', description: 'this document', match: /^\/api\/v1\/openapi\.json$/ },
  { name: 'auth', description: 'login, API keys, passwords', match: /^\/api\/v1\/auth\// },
  { name: 'users', description: 'user management (admins only)', match: /^\/api\/v1\/users(\/|$)/ },
  { name: 'chat', description: 'OpenAI-compatible chat completions and Responses API; `model` is the agent id', match: /^\/api\/v1\/(chat\/completions|responses(\/:id(\/cancel|\/input_items)?)?|models(\/:id)?)$/ },
  { name: 'models', description: 'model providers', match: /^\/api\/v1\/config\/models/ },
  { name: 'config', description: 'server configuration (secrets hidden)', match: /^\/api\/v1\/config$/ },
  { name: 'skills', description: 'global and agent-private skills', match: /^\/api\/v1\/(skills|agents\/:agentId\/skills)(\/|$)/ },
  { name: 'workspace', description: 'agent workspace files', match: /^\/api\/v1\/agents\/:agentId\/workspace\// },
  { name: 'rules', description: 'rule chains', match: /^\/api\/v1\/(rules|agents\/:agentId\/rules)(\/|$)/ },
  { name: 'cron', description: 'scheduled jobs', match: /^\/api\/v1\/(cron|agents\/:agentId\/cron)(\/|$)/ },
  { name: 'runs', description: "an agent's runs and the steps of a run's rule chain", match: /^\/api\/v1\/(runs\/|agents\/:agentId\/runs$)/ },
  { name: 'agents', description: 'agents (rule chains with an ai/agent node)', match: /^\/api\/v1\/(agents|agent-template)(\/|$)/ },
  { name: 'sessions', description: 'conversations', match: /^\/api\/v1\/sessions(\/|$)/ },
  { name: 'usage', description: 'tokens used by model calls (users: their own)', match: /^\/api\/v1\/usage$/ },
  { name: 'tools', description: 'built-in tools and node forms', match: /^\/api\/v1\/tools(\/|$)/ },
  { name: 'channels', description: 'channel accounts, bindings, outbound messages and inbound platform events', match: /^\/api\/v1\/(channels|bindings)(\/|$)/ },
];

const SECURITY: Record<Access, FastifySchema['security']> = {
  public: [],
  chat: [{ bearerAuth: [] }],
  self: [{ bearerAuth: [] }],
  user: [{ bearerAuth: [] }],
  owner: [{ bearerAuth: [] }],
  admin: [{ bearerAuth: [] }],
};

const AUTH_NOTE: Record<Access, string> = {
  public: 'No authentication.',
  chat: 'Needs an API key (an enabled api-platform account key or a user key) or a JWT.',
  self: 'Always needs a JWT from POST /api/v1/auth/login.',
  user: 'Needs a JWT (Authorization: Bearer) when security.requireAuth is true.',
  owner: 'Needs the JWT of the owner of what the path names, or of an admin, when security.requireAuth is true.',
  admin: "Needs an admin's JWT when security.requireAuth is true.",
};

/** `getAgentsByAgentIdSkillsByName`: method and path, unique per operation. */
function operationId(method: string, url: string): string {
  const words = url
    .replace(/^\/api\/v1/, '')
    .split('/')
    .filter(Boolean)
    .map((part) => (part.startsWith(':') ? `By-${part.slice(1)}` : part))
    .flatMap((part) => part.split(/[^A-Za-z0-9]+/))
    .filter(Boolean);
  return [method.toLowerCase(), ...words.map((w) => w[0]!.toUpperCase() + w.slice(1))].join('');
}

/** What every operation of the document carries: tags, auth, an id, the error answer. */
const describeRoute: SwaggerTransform = ({ schema, url, route }) => {
  const tag = TAGS.find((t) => t.match.test(url));
  // Outside the API and the probes is the web UI's fallback: files, not operations.
  if (!tag) return { schema: { ...schema, hide: true }, url };
  const mode: Access = route.config?.access ?? 'admin';
  const method = Array.isArray(route.method) ? route.method[0]! : route.method;
  const declared = (schema as { response?: Record<string, unknown> } | undefined)?.response ?? {};
  const success = Object.keys(declared).some((code) => code.startsWith('2')) ? {} : { '2XX': { description: 'success' } };
  const error = route.config?.errors === 'openai' ? OpenAIErrorBody : ErrorBody;
  return {
    schema: {
      ...schema,
      tags: [tag.name],
      operationId: operationId(method, url),
      description: [schema?.description, AUTH_NOTE[mode]].filter(Boolean).join(' '),
      security: SECURITY[mode],
      // A route declares its success answers on purpose (they are its serializer too); errors
      // are the one `{error}` shape of the error handler, added here so no route repeats them,
      // and a route still without a 2xx schema is shown as a bare success.
      response: { ...success, ...declared, '4XX': { description: 'client error', ...error }, '5XX': { description: 'server error', ...error } },
    } as FastifySchema,
    url,
  };
};

/**
 * A request body for the document only: for bodies fastify must not validate (a multipart
 * stream, raw bytes whose signature is checked, a patch the handler checks itself).
 * Use as the route's `config: { swaggerTransform: documentBody(...) }`.
 */
export function documentBody(body: object, contentTypes: readonly string[] = ['application/json']): SwaggerTransform {
  return (args) => describeRoute({ ...args, schema: { ...args.schema, body, consumes: contentTypes } as FastifySchema });
}

/** The gateway package's version, from its package.json (src/ and dist/src/ alike). */
function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i += 1) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@agentry/gateway' && pkg.version) return pkg.version;
    }
    dir = path.dirname(dir);
  }
  return '0.0.0';
}

/**
 * Registers the document generator. It must come before the routes: it learns them as they are
 * added (onRoute).
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Agentry',
        version: packageVersion(),
        description:
          'Agents behind an OpenAI-compatible chat endpoint and a REST management API. Every error answer is `{"error": string}`, except on the OpenAI-compatible routes (`/chat/completions`, `/responses`, `/models`), which answer the OpenAI object `{"error": {message, type, param, code}}`. ' +
          'Paged lists take `page` (>= 1) and `size` (1..100) and answer `{data, total, page, size}`.',
      },
      tags: TAGS.map(({ name, description }) => ({ name, description })),
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'A JWT from POST /api/v1/auth/login, or (chat only) an API key' },
        },
      },
    },
    transform: describeRoute,
  });
  app.get(OPENAPI_PATH, { config: { access: 'public' }, logLevel: 'warn' }, async () => app.swagger());
}
