import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors } from '@agentry/errors';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from './credentials.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Counts the request against the caller's budget of that name (`security.rateLimit.<name>`). */
    rateLimit?: 'chat';
  }
}

/** How often the "limit not enforced" warning may repeat while the backend stays away. */
const WARN_EVERY_MS = 60_000;

/**
 * Whose budget a request spends: the user (by JWT or by their API key alike), the api account,
 * or for anonymous chat (no key configured, auth off) the client address. Hashed, so that the
 * bus key names no user and no account; never the key itself.
 */
export function budgetKey(principal: Principal, ip: string): string {
  const who =
    principal.kind === 'user' ? `user:${principal.username}` : principal.kind === 'account' ? `account:${principal.platform}:${principal.accountId}` : `ip:${ip}`;
  return createHash('sha256').update(who).digest('base64url').slice(0, 32);
}

/**
 * Per-credential rate limit of the routes tagged `config: {rateLimit: 'chat'}`, from
 * `security.rateLimit.chat` (read per request, so a changed configuration applies at once).
 * Runs after the auth hook, before the body is read: 429 `{error}` with `Retry-After` in seconds.
 * The count lives in the bus (Redis in cluster mode), so every replica spends one budget. When
 * the bus cannot answer, the request goes through with a warning: refusing every chat because
 * the limiter is down would turn an outage of Redis into one of the whole API.
 */
export function registerChatRateLimit(app: FastifyInstance, deps: Pick<GatewayDeps, 'bus' | 'config' | 'logger'>): void {
  let lastWarning = 0;
  const limit = async (req: FastifyRequest, reply: FastifyReply) => {
    const name = req.routeOptions.config.rateLimit;
    if (name === undefined) return;
    const rule = deps.config.current.security.rateLimit[name];
    if (rule.requests === 0) return;
    const key = `${name}:${budgetKey(req.principal, req.ip)}`;
    let result;
    try {
      result = await deps.bus.rateLimit(key, { limit: rule.requests, windowMs: rule.windowSeconds * 1000, burst: rule.burst || rule.requests });
    } catch (err) {
      if (Date.now() - lastWarning >= WARN_EVERY_MS) {
        lastWarning = Date.now();
        deps.logger.warn({ err, limit: name }, `the ${name} rate limit is not enforced: its counter (the bus) does not answer`);
      }
      return;
    }
    if (result.allowed) return;
    const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000));
    reply.header('retry-after', String(seconds));
    req.log.info({ limit: name, retryAfterSeconds: seconds }, 'rate limited');
    throw new Errors.RATE_LIMITED(`this credential sent more than ${rule.requests} ${name} requests in ${rule.windowSeconds} s; try again in ${seconds} s`);
  };
  // A route-level hook of the tagged routes only: fastify runs it after the global ones (the
  // auth hook has set the principal by then), and the other routes do not pay for it.
  app.addHook('onRoute', (route) => {
    if (route.config?.rateLimit === undefined) return;
    route.onRequest = [...[route.onRequest ?? []].flat(), limit];
  });
}
