import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { getUser, setApiKey, setPassword, type UserRecord } from '@agentry/db';
import { ApiKeyAnswer, ApiKeyRegenerated, AuthStatus, LoginBody, LoginResult, PasswordChangeBody, PasswordChanged, announceChange, type InvalidateMessage } from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import type { Auth } from '../auth/auth.js';
import type { Principal } from '../auth/credentials.js';
import { typed, type TypedReply, type TypedRequest } from './common.js';
import { dummyHash, hasDefaultPassword, newPasswordProblem, generateApiKey, hashApiKey, hashPassword, verifyPassword } from '../auth/passwords.js';

const LoginRoute = { body: LoginBody, response: { 200: LoginResult } };
const StatusRoute = { response: { 200: AuthStatus } };
const GetApiKeyRoute = { response: { 200: ApiKeyAnswer } };
const NewApiKeyRoute = { response: { 200: ApiKeyRegenerated } };
const PasswordRoute = { body: PasswordChangeBody, response: { 200: PasswordChanged } };

/** What every handler here works with. */
interface AuthContext {
  deps: GatewayDeps;
  auth: Auth;
  /** This replica at once, the others by the message (or their periodic reload if it is lost). */
  announce(area: InvalidateMessage['area']): Promise<void>;
}

/** Login, the login status, the caller's API key, and password change. */
export function authRoutes(app: FastifyInstance, deps: GatewayDeps, auth: Auth): void {
  const api = typed(app);
  const ctx: AuthContext = {
    deps,
    auth,
    announce: async (area) => {
      await auth.index.reload();
      await announceChange(deps.bus.pubsub, deps.logger, area);
    },
  };
  api.post('/auth/login', { config: { access: 'public' }, schema: LoginRoute }, login(ctx));
  api.get('/auth/status', { config: { access: 'public' }, schema: StatusRoute }, loginStatus(ctx));
  api.get('/auth/api-key', { config: { access: 'self' }, schema: GetApiKeyRoute }, getApiKey(ctx));
  api.post('/auth/api-key', { config: { access: 'self' }, schema: NewApiKeyRoute }, regenerateApiKey(ctx));
  api.put('/auth/password', { config: { access: 'self' }, schema: PasswordRoute }, changePassword(ctx));
}

/** The caller's user row; a token whose user is gone is a 401. */
async function currentUser(deps: GatewayDeps, principal: Principal): Promise<UserRecord> {
  const user = principal.kind === 'user' ? await getUser(deps.db.db, principal.username) : undefined;
  if (!user) throw new Errors.UNAUTHORIZED('invalid token');
  return user;
}

function login({ deps, auth }: AuthContext) {
  return async function login(req: TypedRequest<typeof LoginRoute>, reply: TypedReply<typeof LoginRoute>): Promise<LoginResult> {
    const { username, password } = req.body;
    const wait = await auth.login.attempt(req.ip, username);
    if (wait > 0) {
      reply.header('retry-after', String(wait));
      throw new Errors.RATE_LIMITED(`too many login attempts; try again in ${wait} s`);
    }
    const user = await getUser(deps.db.db, username);
    // The same work and the same answer whether the user exists or the password is wrong.
    const ok = await verifyPassword(password, user?.passwordHash ?? (await dummyHash()));
    if (!user || !ok) {
      await auth.login.failed(req.ip, username);
      req.log.info({ username }, 'login failed');
      throw new Errors.UNAUTHORIZED('wrong username or password');
    }
    // Told only to someone who knows the password, so the answer reveals nothing to a guesser.
    if (user.disabled) throw new Errors.FORBIDDEN(`user "${username}" is disabled; ask an admin to enable it`);
    await auth.login.succeeded(req.ip, username);
    const hours = deps.config.current.security.jwtExpireHours;
    return auth.tokens.sign(user, hours);
  };
}

/**
 * What a login screen needs before anyone logs in (public): whether management needs a login,
 * and who the Bearer JWT sent (if any, and still valid) belongs to. `defaultPassword` (admin
 * still has the documented default password) is told only to the admin, or to anyone on an open
 * server (requireAuth false: they already have admin's power): on a closed one an anonymous
 * caller must not learn, without even a logged failed login, that admin/admin opens the service.
 */
function loginStatus({ deps, auth }: AuthContext) {
  return async function loginStatus(req: TypedRequest<typeof StatusRoute>): Promise<AuthStatus> {
    const requireAuth = deps.config.current.security.requireAuth;
    const header = /^Bearer (\S+)$/.exec(req.headers.authorization?.trim() ?? '');
    let user: { username: string; role: string } | null = null;
    if (header) {
      const claims = await auth.tokens.verify(header[1]!).catch(() => undefined);
      const known = claims ? auth.index.user(claims.username) : undefined;
      if (claims && known && known.tokenVersion === claims.tokenVersion) user = { username: claims.username, role: known.role };
    }
    // On an open server an anonymous caller already manages everything: the warning hides nothing from them.
    if (user?.role !== 'admin' && requireAuth) return { requireAuth, user };
    if (user && user.role !== 'admin') return { requireAuth, user };
    const defaultPassword = await hasDefaultPassword(deps.db.db, user?.username ?? 'admin');
    // What makes chat key-only is the credential index's own rule (anyKeyConfigured), told as is.
    return requireAuth ? { requireAuth, user, defaultPassword } : { requireAuth, user, defaultPassword, chatNeedsKey: auth.index.anyKeyConfigured };
  };
}

function getApiKey({ deps }: AuthContext) {
  return async function getApiKey(req: TypedRequest<typeof GetApiKeyRoute>): Promise<ApiKeyAnswer> {
    const user = await currentUser(deps, req.principal);
    return { apiKey: user.apiKeySealed ? deps.secrets.open(user.apiKeySealed) : null };
  };
}

function regenerateApiKey({ deps, announce }: AuthContext) {
  return async function regenerateApiKey(req: TypedRequest<typeof NewApiKeyRoute>): Promise<ApiKeyRegenerated> {
    const user = await currentUser(deps, req.principal);
    const apiKey = generateApiKey();
    await setApiKey(deps.db.db, user.username, { hash: hashApiKey(apiKey), sealed: deps.secrets.seal(apiKey) });
    await announce('apiKeys');
    req.log.info({ username: user.username }, 'API key regenerated');
    return { apiKey };
  };
}

function changePassword({ deps, auth, announce }: AuthContext) {
  return async function changePassword(req: TypedRequest<typeof PasswordRoute>): Promise<PasswordChanged> {
    const user = await currentUser(deps, req.principal);
    if (!(await verifyPassword(req.body.oldPassword, user.passwordHash))) throw new Errors.FORBIDDEN('the old password is wrong');
    const problem = newPasswordProblem('newPassword', req.body.newPassword);
    if (problem) throw new Errors.VALIDATION(problem);
    const tokenVersion = await setPassword(deps.db.db, user.username, await hashPassword(req.body.newPassword));
    await announce('users');
    req.log.info({ username: user.username }, 'password changed; older tokens revoked');
    // Every older token (this one included) stops working; hand back a fresh one.
    const fresh = await auth.tokens.sign({ username: user.username, tokenVersion }, deps.config.current.security.jwtExpireHours);
    return { success: true, message: 'password changed; tokens issued before now are no longer valid', ...fresh };
  };
}
