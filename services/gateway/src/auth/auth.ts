import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Errors } from '@agentry/errors';
import { getUser } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { CredentialIndex, type Principal } from './credentials.js';
import { DEFAULT_ADMIN_PASSWORD, verifyPassword } from './passwords.js';
import { LoginLimiter } from './login-limit.js';
import { seedFromConfig } from './seed.js';
import { Tokens } from './tokens.js';

/** How a route is guarded. Management is the default for every `/api/v1` route. */
export type AuthMode = 'public' | 'management' | 'jwt' | 'chat';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}

export interface Auth {
  index: CredentialIndex;
  tokens: Tokens;
  /** Login attempts per client address and failures per username, shared by the replicas. */
  login: LoginLimiter;
  close(): Promise<void>;
}

/**
 * Writes that only admins may make when authentication is required: configuration, providers,
 * channels, bindings and global skills. Matched on the route pattern, in one place, so that a
 * new route under these prefixes is guarded without anyone remembering to tag it.
 */
const ADMIN_WRITE_PREFIXES = ['/api/v1/config', '/api/v1/skills', '/api/v1/channels', '/api/v1/bindings'];

/**
 * Tool and node settings that lift the outbound address policy (SSRF guard). A `user` may write
 * agents and rule chains but not these: otherwise any account could point `http_fetch`,
 * `restApiCall`, an MCP server or a sandboxed `bash` at the metadata address or the cluster's
 * own services.
 */
const NETWORK_OPENERS = ['allowPrivateNetworks', 'allowHosts', 'allowNetwork'] as const;

/** Objects and arrays a body may hold before it is refused unchecked (the body limit keeps real ones far below). */
const MAX_NODES_CHECKED = 200_000;

/**
 * The first key of NETWORK_OPENERS set to something that opens (true, a non-empty list),
 * anywhere in a parsed body; `'too complex'` when the body holds more nodes than are checked,
 * so that an opener cannot hide behind a mass of empty arrays.
 */
export function findNetworkOpener(body: unknown): string | undefined {
  // Iterative: bodies come from the network and may nest thousands deep.
  const stack: unknown[] = [body];
  for (let seen = 0; stack.length > 0; seen++) {
    if (seen >= MAX_NODES_CHECKED) return 'too complex';
    const value = stack.pop();
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (const item of value) if (item !== null && typeof item === 'object') stack.push(item);
      continue;
    }
    const record = value as Record<string, unknown>;
    for (const key of NETWORK_OPENERS) {
      const v = record[key];
      if (v === true || (Array.isArray(v) && v.length > 0) || (typeof v === 'string' && v !== '' && v !== 'false')) return key;
    }
    for (const v of Object.values(record)) if (v !== null && typeof v === 'object') stack.push(v);
  }
  return undefined;
}

const BEARER = /^Bearer ([A-Za-z0-9._~+/=-]+)$/;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export async function createAuth(deps: GatewayDeps): Promise<Auth> {
  const config = deps.config.current;
  await seedFromConfig({ db: deps.db.db, secrets: deps.secrets, config, logger: deps.logger });
  const tokens = await Tokens.open({
    db: deps.db.db,
    secrets: deps.secrets,
    configured: config.security.jwtSecret,
    maxHours: () => deps.config.current.security.jwtExpireHours,
  });
  const index = new CredentialIndex(deps.db.db, deps.logger, () => deps.config.current.channels.api?.enabled ?? true);
  await index.start(deps.bus);
  await startupWarnings(deps);
  return {
    index,
    tokens,
    login: new LoginLimiter(deps.bus, deps.logger),
    close: () => index.close(),
  };
}

/** One warning line each, once per cluster start (the first replica to get here says it). */
async function startupWarnings(deps: GatewayDeps): Promise<void> {
  const c = deps.config.current;
  const loopback = ['127.0.0.1', 'localhost', '::1'].includes(c.server.host);
  if (!c.security.requireAuth && !loopback) {
    deps.logger.warn(
      { host: c.server.host },
      'security.requireAuth is false while listening on a non-loopback address: anyone who can reach this port can manage agents',
    );
  }
  if (c.security.requireAuth) {
    const admin = await getUser(deps.db.db, 'admin');
    if (admin && (await verifyPassword(DEFAULT_ADMIN_PASSWORD, admin.passwordHash))) {
      deps.logger.warn('the admin user still has the default password while security.requireAuth is true: change it (PUT /api/v1/auth/password)');
    }
  }
}

function bearer(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  const m = BEARER.exec(header.trim());
  if (!m) throw new Errors.UNAUTHORIZED('malformed Authorization header (expected "Bearer <token>")');
  return m[1]!;
}

async function fromJwt(auth: Auth, token: string): Promise<Principal> {
  const claims = await auth.tokens.verify(token);
  const user = auth.index.user(claims.username);
  // A deleted user, or a token older than the last password change, is refused.
  if (!user || user.tokenVersion !== claims.tokenVersion) throw new Errors.UNAUTHORIZED('invalid token');
  return { kind: 'user', username: claims.username, role: user.role, via: 'jwt' };
}

async function fromAny(auth: Auth, token: string): Promise<Principal> {
  if (JWT_SHAPE.test(token)) return fromJwt(auth, token);
  const principal = auth.index.byApiKey(token);
  if (!principal) throw new Errors.UNAUTHORIZED('invalid API key');
  return principal;
}

/** The one guard of every `/api/v1` route; `/health`, `/ready`, `/metrics` and the UI are open. */
export function registerAuthHook(app: FastifyInstance, deps: GatewayDeps, auth: Auth): void {
  // Starts null on the prototype (fastify forbids shared objects there); set per request below.
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (req) => {
    req.principal = { kind: 'anonymous' };
    const path = req.url.split('?')[0] ?? '';
    if (path !== '/api/v1' && !path.startsWith('/api/v1/')) return;
    const mode: AuthMode = req.routeOptions.config?.auth ?? 'management';
    const requireAuth = deps.config.current.security.requireAuth;
    switch (mode) {
      case 'public':
        return;
      case 'jwt': {
        const token = bearer(req);
        if (!token) throw new Errors.UNAUTHORIZED('this route needs a JWT from POST /api/v1/auth/login');
        if (!JWT_SHAPE.test(token)) throw new Errors.UNAUTHORIZED('this route needs a JWT, not an API key');
        req.principal = await fromJwt(auth, token);
        return;
      }
      case 'chat': {
        const token = bearer(req);
        if (token) {
          req.principal = await fromAny(auth, token);
          return;
        }
        if (requireAuth || auth.index.anyKeyConfigured) throw new Errors.UNAUTHORIZED('send an API key as "Authorization: Bearer <key>"');
        return;
      }
      case 'management': {
        if (!requireAuth) return;
        const token = bearer(req);
        if (!token) throw new Errors.UNAUTHORIZED('log in (POST /api/v1/auth/login) and send the JWT as "Authorization: Bearer <token>"');
        if (!JWT_SHAPE.test(token)) throw new Errors.UNAUTHORIZED('management routes need a JWT, not an API key');
        const principal = await fromJwt(auth, token);
        req.principal = principal;
        const route = req.routeOptions.url ?? path;
        const write = req.method !== 'GET' && req.method !== 'HEAD';
        if (write && principal.kind === 'user' && principal.role !== 'admin' && ADMIN_WRITE_PREFIXES.some((p) => route.startsWith(p))) {
          throw new Errors.FORBIDDEN(`only an admin may change ${route}`);
        }
        return;
      }
      default: {
        const never: never = mode;
        throw new Errors.INTERNAL(`unknown auth mode ${String(never)}`);
      }
    }
  });
  // The body is parsed by now (it is not at onRequest). Admins and open (no-auth) setups pass.
  app.addHook('preValidation', async (req) => {
    const p = req.principal;
    if (p.kind !== 'user' || p.role === 'admin' || req.method === 'GET' || req.method === 'HEAD') return;
    if ((req.routeOptions.config?.auth ?? 'management') !== 'management') return;
    const key = findNetworkOpener(req.body);
    if (key === 'too complex') throw new Errors.FORBIDDEN(`this body nests more than ${MAX_NODES_CHECKED} objects and arrays; only an admin may send one`);
    if (key) throw new Errors.FORBIDDEN(`only an admin may set ${key}: it lets tools reach private and loopback addresses`);
  });
}
