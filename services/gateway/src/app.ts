import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Histogram } from 'prom-client';
import { Errors } from '@agentry/errors';
import { errorAnswer, onClientError, sendFrameworkError, toAppError } from './http-errors.js';
import { probeRoutes } from './routes/probes.js';
import { configRoutes } from './routes/config.js';
import { modelRoutes } from './routes/models.js';
import type { GatewayDeps } from './deps.js';
import { createAuth, registerAuthHook, requireAccessDeclarations, type Auth } from './auth/auth.js';
import { authRoutes } from './routes/auth.js';
import { userRoutes } from './routes/users.js';
import { chatRoutes } from './routes/chat.js';
import { responsesRoutes } from './routes/responses.js';
import { sessionRoutes } from './routes/sessions.js';
import { usageRoutes } from './routes/usage.js';
import multipart from '@fastify/multipart';
import { chainRoutes } from './routes/chains.js';
import { skillRoutes, MAX_ARCHIVE_BYTES } from './routes/skills.js';
import { workspaceRoutes } from './routes/workspace.js';
import { agentTemplateRoutes } from './routes/agent-template.js';
import { cronRoutes } from './routes/cron.js';
import { runRoutes } from './routes/runs.js';
import { toolRoutes } from './routes/tools.js';
import { channelRoutes } from './routes/channels.js';
import { uiRoutes } from './ui.js';
import { registerCors } from './auth/cors.js';
import { registerAllowFrom } from './auth/allow-from.js';
import { registerSecurityHeaders } from './auth/security-headers.js';
import { registerChatRateLimit } from './auth/chat-rate-limit.js';
import { registerOpenApi } from './openapi.js';
import { registerJsonBodyParser } from './json-body.js';
import { warnSharedPowers } from './auth/audience.js';
import { capConnectionsPerAddress } from './connection-limit.js';


const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** What `buildGateway` takes besides its deps. */
export interface GatewayOptions {
  /** Interval of `: ping` comments on idle SSE streams (default 15 s). */
  heartbeatMs?: number;
  /** How long POST /channels/{platform}/send* waits for the platform (default 30 s). */
  sendWaitMs?: number;
  /** The built web UI (`@agentry/web`'s build directory), served at `/`; without it `/` is a 404. */
  uiDir?: string;
}

/**
 * Builds the gateway app from its deps. It never listens and imports nothing from the
 * configuration file: `startGateway` (main and standalone) seeds first (`seedGateway`).
 */
export async function buildGateway(deps: GatewayDeps, opts: GatewayOptions = {}): Promise<FastifyInstance> {
  const config = deps.config.current;
  const app = createFastify(deps);
  requireAccessDeclarations(app);
  capConnectionsPerAddress(app.server, config.server.max_connections_per_address, deps.logger);
  registerRequestHooks(app, deps);
  registerErrorHandlers(app);

  await warnSharedPowers(deps.db.db, deps.logger);
  const auth = await createAuth(deps);
  app.addHook('onClose', () => auth.close());
  // Headers and CORS first: a preflight carries no credentials and is answered before the auth hook.
  registerSecurityHeaders(app);
  await registerCors(app, config.server.cors_origins);
  registerAllowFrom(app, deps);
  registerAuthHook(app, deps, auth);
  registerChatRateLimit(app, deps);

  registerJsonBodyParser(app);
  // Before every route: the document generator learns the routes as they are added.
  await registerOpenApi(app);
  probeRoutes(app, deps);
  await app.register((api) => registerApiRoutes(api, deps, auth, opts), { prefix: '/api/v1' });
  if (opts.uiDir !== undefined) await uiRoutes(app, deps, opts.uiDir);
  return app;
}

/** The fastify instance with the server's limits, proxy trust and request ids. */
function createFastify(deps: GatewayDeps): FastifyInstance {
  const config = deps.config.current;
  return Fastify({
    // pino's Logger is fastify's logger; the cast only widens the instance's logger type.
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: config.server.body_limit,
    // A trickled body or header would otherwise hold its connection forever (Node checks the
    // deadline on an interval, 30 s by default: checking every second keeps it near the limit).
    requestTimeout: config.server.request_timeout_ms,
    http: {
      headersTimeout: config.server.request_timeout_ms,
      connectionsCheckingInterval: Math.min(1000, config.server.request_timeout_ms),
    },
    trustProxy: trustProxyOption(config.server.trust_proxy),
    // A caller's request id is kept (so logs join across systems) when it looks like one.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
    // Fastify's ajv removes fields a closed schema does not name, silently: a misspelt field
    // (match.acount_id) vanished and the request did something else than asked. Off, it is a 400
    // naming the field (http-errors.ts). Open schemas (chat completions) are unaffected.
    ajv: { customOptions: { removeAdditional: false } },
    // What the router and Node's parser refuse is answered as {error} too.
    frameworkErrors: sendFrameworkError,
    clientErrorHandler: onClientError,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  });
}

/** The request id echoed on every answer, and the duration of every request by route. */
function registerRequestHooks(app: FastifyInstance, deps: GatewayDeps): void {
  // One histogram per registry, however many apps are built on it (tests build several).
  const httpDuration =
    (deps.metrics.getSingleMetric('http_request_duration_seconds') as Histogram<'method' | 'route' | 'status'> | undefined) ??
    new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route and status',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [deps.metrics],
    });

  // Callbacks, not async hooks: neither waits, and an async hook costs every request a promise.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    httpDuration.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
}

/** The one place `{error}` answers are built: thrown errors and unknown routes. */
function registerErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err, req, reply) => {
    const appErr = toAppError(err);
    if (appErr.status >= 500) req.log.error({ err }, 'request failed');
    else req.log.info({ code: appErr.code, msg: appErr.message }, 'request rejected');
    const message = appErr.status >= 500 && appErr.code === 'INTERNAL' ? `${appErr.message} (request id ${req.id})` : appErr.message;
    return reply.status(appErr.status).send(errorAnswer(req, reply, appErr, message));
  });

  app.setNotFoundHandler((req, reply) => {
    const err = new Errors.ROUTE_NOT_FOUND(`${req.method} ${req.url.split('?')[0]}`);
    return reply.status(err.status).send({ error: err.message });
  });
}

/** Every `/api/v1` route family. */
async function registerApiRoutes(api: FastifyInstance, deps: GatewayDeps, auth: Auth, opts: GatewayOptions): Promise<void> {
  authRoutes(api, deps, auth);
  userRoutes(api, deps, auth);
  configRoutes(api, deps);
  modelRoutes(api, deps);
  chatRoutes(api, deps, { heartbeatMs: opts.heartbeatMs ?? 15_000 });
  responsesRoutes(api, deps, { heartbeatMs: opts.heartbeatMs ?? 15_000 });
  sessionRoutes(api, deps);
  usageRoutes(api, deps);
  await api.register(multipart, { limits: { fileSize: MAX_ARCHIVE_BYTES, files: 1 } });
  await chainRoutes(api, deps);
  skillRoutes(api, deps);
  workspaceRoutes(api, deps);
  agentTemplateRoutes(api, deps);
  cronRoutes(api, deps);
  runRoutes(api, deps, opts.heartbeatMs ?? 15_000);
  toolRoutes(api, deps);
  channelRoutes(api, deps, { sendWaitMs: opts.sendWaitMs ?? 30_000, reloadCredentials: () => auth.index.reload() });
}

/** `server.trust_proxy` as fastify takes it: a hop count becomes "trust the nearest N hops". */
function trustProxyOption(value: boolean | number | string): boolean | string | ((address: string, hop: number) => boolean) {
  if (typeof value === 'number') return (_address, hop) => hop < value;
  return value;
}
