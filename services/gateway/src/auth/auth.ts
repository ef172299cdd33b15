import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Errors } from '@agentry/errors';
import { definitionRefusals as engineRefusals, powerRefusal, validateRuleChain, type RuleChainDsl, type RunAuthority } from '@agentry/definitions';
import type { GatewayDeps } from '../deps.js';
import { CredentialIndex, type Principal } from './credentials.js';
import { hasDefaultPassword } from './passwords.js';
import { LoginLimiter } from './login-limit.js';
import { assertOwner, isAdmin, sessionOwner, type Owned } from './ownership.js';
import { Tokens } from './tokens.js';

/**
 * Who may call a route, declared in every route's `config.access` and checked by one hook on the
 * route fastify matched (never on the raw URL, which has many spellings):
 * - `public`: anyone (login, probes, the UI, platform webhooks that verify their own signatures);
 * - `chat`: an API key (a user's or an api account's) or a JWT; nothing when no key exists and
 *   `security.requireAuth` is false;
 * - `self`: a JWT, whatever requireAuth says (the caller's own API key and password);
 * - `user`: any logged-in user; `owner`: a user who owns the row the path names (`config.owns`),
 *   or an admin; `admin`: an admin. With requireAuth false these three need nothing and the
 *   caller acts as an admin (spec: "no authentication is needed").
 */
export type Access = 'public' | 'chat' | 'self' | 'user' | 'owner' | 'admin';

export const ACCESS_LEVELS: readonly Access[] = ['public', 'chat', 'self', 'user', 'owner', 'admin'];

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
    /** On `owner` routes: which row the path names (see auth/ownership.ts). */
    owns?: Owned;
  }
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyInstance {
    /** Every route with its declared access, as registered: what the access matrix test walks. */
    routeAccess: readonly RouteAccess[];
  }
}

export interface RouteAccess {
  method: string;
  url: string;
  access: Access;
  owns?: Owned;
  /** Status codes with a declared response schema (`schema.response`): what a JSON route answers. */
  responses: string[];
  /** The declared request body schema, if any: the closed-bodies test walks it. */
  body?: unknown;
  /** `none`: outside the address allow-lists (see allow-from.ts). */
  addressList?: 'none';
}

export interface Auth {
  index: CredentialIndex;
  tokens: Tokens;
  /** Login attempts per client address and failures per username, shared by the replicas. */
  login: LoginLimiter;
  close(): Promise<void>;
}

/**
 * Tool and node settings that lift the outbound address policy (SSRF guard). A `user` may write
 * agents and rule chains but not these: otherwise any account could point `http_fetch`,
 * `restApiCall`, an MCP server or a sandboxed `bash` at the metadata address or the cluster's
 * own services.
 */
export const NETWORK_OPENERS = ['allowPrivateNetworks', 'allowHosts', 'allowNetwork'] as const;

/** Objects and arrays a body may hold before it is refused unchecked (the body limit keeps real ones far below). */
const MAX_NODES_CHECKED = 200_000;

/**
 * What a non-admin body may not hold, anywhere: the first key of NETWORK_OPENERS set to
 * something that opens (true, a non-empty list), or `'bash'` for a builtin tool entry naming
 * the bash tool (it runs commands on the worker); `'too complex'` when the body holds more nodes
 * than are checked, so that neither can hide behind a mass of empty arrays.
 */
export function findAdminOnlySetting(body: unknown): string | undefined {
  let found: string | undefined;
  const complete = eachObject(body, (record) => {
    for (const key of NETWORK_OPENERS) {
      if (opens(record[key])) found = key;
      if (found) return false;
    }
    if (isBashToolEntry(record)) found = 'bash';
    return found === undefined;
  });
  return found ?? (complete ? undefined : 'too complex');
}

/** Whether a NETWORK_OPENERS value opens anything (true, a non-empty list or string other than "false"). */
export function opens(v: unknown): boolean {
  return v === true || (Array.isArray(v) && v.length > 0) || (typeof v === 'string' && v !== '' && v !== 'false');
}

/**
 * Calls `visit` with every object (not array) inside `body`, until it answers false. Iterative:
 * bodies come from the network and may nest thousands deep. False when it stopped at
 * MAX_NODES_CHECKED objects and arrays before seeing them all.
 */
export function eachObject(body: unknown, visit: (record: Record<string, unknown>) => boolean): boolean {
  const stack: unknown[] = [body];
  for (let seen = 0; stack.length > 0; seen++) {
    if (seen >= MAX_NODES_CHECKED) return false;
    const value = stack.pop();
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (const item of value) if (item !== null && typeof item === 'object') stack.push(item);
      continue;
    }
    const record = value as Record<string, unknown>;
    if (!visit(record)) return true;
    for (const v of Object.values(record)) if (v !== null && typeof v === 'object') stack.push(v);
  }
  return true;
}

/** An agent's `tools[]` entry for the builtin bash tool (`type` defaults to builtin). */
export function isBashToolEntry(record: Record<string, unknown>): boolean {
  return isBuiltinToolEntry(record, 'bash');
}

/** An agent's `tools[]` entry for the builtin tool `tool` (`type` defaults to builtin). */
export function isBuiltinToolEntry(record: Record<string, unknown>, tool: string): boolean {
  const name = record['name'];
  const type = record['type'];
  return typeof name === 'string' && name.trim().toLowerCase() === tool && (type === undefined || type === 'builtin');
}

const BEARER = /^Bearer ([A-Za-z0-9._~+/=-]+)$/;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export async function createAuth(deps: GatewayDeps): Promise<Auth> {
  const config = deps.config.current;
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
    if (await hasDefaultPassword(deps.db.db)) {
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
  return { kind: 'user', username: claims.username, role: user.role, via: 'jwt', ...(user.budget ? { budget: user.budget } : {}) };
}

const OPEN: Principal = { kind: 'open' };
const ANONYMOUS: Principal = { kind: 'anonymous' };

/** What a chat 401 tells its caller: where the keys it may send come from. */
export const HOW_TO_GET_A_KEY =
  'a user API key comes from POST /api/v1/auth/api-key (after POST /api/v1/auth/login), an api account key from channels.api.accounts.<id>.api_key';

/**
 * The caller of a chat route. In open mode (`requireAuth` false and no key exists) a token that
 * is no key at all is the placeholder every OpenAI SDK must send (`EMPTY`, `sk-no-key`): the
 * caller is anonymous, as with no header; a known key still names its principal and a JWT is
 * still verified (a bad one is a client's mistake worth telling).
 */
async function chatPrincipal(auth: Auth, token: string, open: boolean): Promise<Principal> {
  if (JWT_SHAPE.test(token)) return fromJwt(auth, token);
  const principal = auth.index.byApiKey(token);
  if (principal) return principal;
  if (open) return ANONYMOUS;
  throw new Errors.UNAUTHORIZED(`invalid API key: ${HOW_TO_GET_A_KEY}`);
}

/**
 * Refuses to start with a route that does not say who may call it: a new route cannot slip
 * past the guard by being forgotten. Must be registered before any route.
 */
export function requireAccessDeclarations(app: FastifyInstance): void {
  const table: RouteAccess[] = [];
  app.decorate('routeAccess', table);
  app.addHook('onRoute', (route) => {
    // @fastify/cors answers preflights on `OPTIONS *`: no credentials come with a preflight.
    if (route.method === 'OPTIONS' && route.url === '*' && route.config?.access === undefined) route.config = { ...route.config, access: 'public', addressList: 'none' };
    const access = route.config?.access;
    const where = `${String(route.method)} ${route.url}`;
    if (access === undefined || !ACCESS_LEVELS.includes(access)) {
      throw new Error(`route ${where} declares no access (config.access: ${ACCESS_LEVELS.join(' | ')})`);
    }
    if (access === 'owner' && route.config?.owns === undefined) throw new Error(`owner route ${where} does not say what it owns (config.owns)`);
    // Only a route anyone may call can stand outside the address allow-lists.
    if (route.config?.addressList === 'none' && access !== 'public') throw new Error(`route ${where} (access ${access}) cannot set addressList: 'none'`);
    const owns = route.config?.owns;
    const responses = Object.keys((route.schema?.response as Record<string, unknown> | undefined) ?? {});
    const body = route.schema?.body;
    for (const method of [route.method].flat()) {
      const addressList = route.config?.addressList;
      table.push({ method: String(method), url: route.url, access, ...(owns ? { owns } : {}), responses, ...(body ? { body } : {}), ...(addressList ? { addressList } : {}) });
    }
  });
}


/** The one guard of every route, decided on the route fastify matched. */
export function registerAuthHook(app: FastifyInstance, deps: GatewayDeps, auth: Auth): void {
  // Starts null on the prototype (fastify forbids shared objects there); set per request below.
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (req) => {
    req.principal = ANONYMOUS;
    // No route matched: the not-found handler answers 404 to everyone, credentials or not.
    if (req.is404) return;
    const access = req.routeOptions.config.access;
    const requireAuth = deps.config.current.security.requireAuth;
    switch (access) {
      case 'public':
        return;
      case 'chat': {
        const token = bearer(req);
        const open = !requireAuth && !auth.index.anyKeyConfigured;
        if (token) {
          req.principal = await chatPrincipal(auth, token, open);
          return;
        }
        if (!open) throw new Errors.UNAUTHORIZED(`send an API key as "Authorization: Bearer <key>": ${HOW_TO_GET_A_KEY}`);
        return;
      }
      case 'self':
        req.principal = await jwtPrincipal(auth, req, 'this route needs a JWT from POST /api/v1/auth/login', 'this route needs a JWT, not an API key');
        return;
      case 'user':
      case 'owner':
      case 'admin': {
        if (!requireAuth) {
          req.principal = OPEN;
          return;
        }
        const principal = await jwtPrincipal(
          auth,
          req,
          'log in (POST /api/v1/auth/login) and send the JWT as "Authorization: Bearer <token>"',
          'management routes need a JWT, not an API key',
        );
        req.principal = principal;
        if (access === 'admin' && !isAdmin(principal)) throw new Errors.FORBIDDEN(`only an admin may ${req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'change'} ${req.routeOptions.url ?? ''}`);
        return;
      }
      case undefined:
        // requireAccessDeclarations makes this unreachable; refusing is the safe answer anyway.
        throw new Errors.FORBIDDEN('this route declares no access');
      default: {
        const never: never = access;
        throw new Errors.INTERNAL(`unknown access ${String(never)}`);
      }
    }
  });
  // Before validation, so a non-owner learns nothing from a 400 about a row it may not touch:
  // one query for the owner of the row the path names.
  const ownerCheck = async (req: FastifyRequest) => {
    await assertOwner(deps.db.db, req.principal, req.routeOptions.config.owns, req.params);
  };
  // The body is parsed by now (it is not at onRequest). Admins and open (no-auth) setups pass.
  const adminOnlySettings = async (req: FastifyRequest) => {
    const p = req.principal;
    if (isAdmin(p) || p.kind !== 'user' || req.method === 'GET' || req.method === 'HEAD') return;
    const key = findAdminOnlySetting(req.body);
    if (key === 'too complex') throw new Errors.FORBIDDEN(`this body nests more than ${MAX_NODES_CHECKED} objects and arrays; only an admin may send one`);
    // The words the run and the save-time check use for the same refusal.
    if (key) throw new Errors.FORBIDDEN(powerRefusal({ owner: p.username }, key));
    // The same policy the run asks, on the definition resolved as the runner resolves it.
    const refused = definitionRefusals(req.body, { principal: sessionOwner(p), agentOwner: p.username, owner: p.username, admin: false }, deps.config.current.worker.chain_globals);
    if (refused.length > 0) throw new Errors.FORBIDDEN(refused.join('; '));
  };
  // On the routes that need them only (user and owner routes), not as global hooks: the chat
  // routes, which carry most requests, would pay two promises each for checks that never apply.
  app.addHook('onRoute', (route) => {
    const access = route.config?.access;
    if (access !== 'user' && access !== 'owner') return;
    route.preValidation = [...[route.preValidation ?? []].flat(), ...(access === 'owner' ? [ownerCheck] : []), adminOnlySettings];
  });
}

/** Why a non-admin may not save `body` when it is a valid rule-chain DSL (agents included); [] otherwise. */
function definitionRefusals(body: unknown, authority: RunAuthority, globals: Readonly<Record<string, string>>): string[] {
  if (body === null || typeof body !== 'object' || !('metadata' in body) || !validateRuleChain(body).ok) return [];
  return engineRefusals(body as RuleChainDsl, authority, globals);
}

async function jwtPrincipal(auth: Auth, req: FastifyRequest, missing: string, notJwt: string): Promise<Principal> {
  const token = bearer(req);
  if (!token) throw new Errors.UNAUTHORIZED(missing);
  if (!JWT_SHAPE.test(token)) throw new Errors.UNAUTHORIZED(notJwt);
  return fromJwt(auth, token);
}
