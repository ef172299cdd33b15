import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Errors } from '@agentry/errors';
import { AddressList, invalidCidrs, type AgentryConfig } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import type { Access } from './auth.js';

/**
 * `security.allowFrom`: which client addresses may call which routes. The list a route falls
 * under follows from its declared access (the route fastify matched, never the raw URL):
 * `chat` routes under `chat`, every other route under `management`, except the public routes
 * that declare `config.addressList: 'none'` (probes, the UI's files, platform webhooks, CORS
 * preflights). Login is public but management: it is how management starts.
 */
export type AddressListName = 'management' | 'chat';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `none`: no allow-list applies (probes, UI files, webhooks); otherwise the access decides. */
    addressList?: 'none';
  }
}

/** The list that guards a route with this access, or undefined for none. */
export function addressListOf(access: Access, addressList?: 'none'): AddressListName | undefined {
  if (addressList === 'none') return undefined;
  return access === 'chat' ? 'chat' : 'management';
}

/** Parsed lists of one configuration, reparsed only when the configuration object changes. */
function listsOf(): (config: AgentryConfig) => Record<AddressListName, AddressList> {
  let seen: AgentryConfig['security']['allowFrom'] | undefined;
  let lists: Record<AddressListName, AddressList> | undefined;
  return (config) => {
    const allowFrom = config.security.allowFrom;
    if (allowFrom !== seen || !lists) {
      lists = { management: new AddressList(allowFrom.management), chat: new AddressList(allowFrom.chat) };
      seen = allowFrom;
    }
    return lists;
  };
}

/** Before authentication: a refused address learns nothing about credentials or routes' rules. */
export function registerAllowFrom(app: FastifyInstance, deps: GatewayDeps): void {
  const lists = listsOf();
  // A callback, not an async hook: the check never waits, and a promise per request is not free.
  app.addHook('onRequest', (req, _reply, done) => {
    if (req.is404) return done();
    const { access, addressList } = req.routeOptions.config;
    // No declaration cannot happen (requireAccessDeclarations); if it did, the stricter list applies.
    const name = addressListOf(access ?? 'admin', addressList);
    if (name === undefined || lists(deps.config.current)[name].allows(req.ip)) return done();
    req.log.warn({ ip: req.ip, list: `security.allowFrom.${name}`, route: req.routeOptions.url }, 'address refused by the allow-list');
    done(new Errors.FORBIDDEN(`address ${req.ip} is not in security.allowFrom.${name}`));
  });
}

/**
 * PUT /config: 400 naming every entry of the patch's lists that is not a CIDR, and 400 when
 * the new management list would refuse the address making the change (it could not undo it).
 */
export function assertAllowFromPatch(req: FastifyRequest, patch: unknown): void {
  const allowFrom = (patch as { security?: { allowFrom?: Partial<Record<AddressListName, unknown>> } }).security?.allowFrom;
  if (allowFrom === undefined) return;
  const problems: string[] = [];
  for (const name of ['management', 'chat'] as const) {
    const entries = allowFrom[name];
    if (!Array.isArray(entries)) continue;
    const bad = invalidCidrs(entries.filter((e): e is string => typeof e === 'string'));
    if (bad.length > 0) problems.push(`security.allowFrom.${name}: not a CIDR or address: ${bad.map((b) => JSON.stringify(b)).join(', ')}`);
  }
  if (problems.length > 0) throw new Errors.VALIDATION(problems.join('; '));
  const management = allowFrom.management;
  if (Array.isArray(management) && !new AddressList(management as string[]).allows(req.ip)) {
    throw new Errors.VALIDATION(
      `security.allowFrom.management does not include your address ${req.ip}: this change would lock you out of management; add it (e.g. "${req.ip}") or an enclosing CIDR`,
    );
  }
}
