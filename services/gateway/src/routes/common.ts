import type {
  ContextConfigDefault,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifySchema,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Errors } from '@agentry/errors';
import { PageQueryFields, announceChange } from '@agentry/contracts';
import { getRuleChain, type Db, type RuleChainRow } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';

/** Shared pieces of the agent, rule, skill and workspace routes. */

export function typed(app: FastifyInstance) {
  return app.withTypeProvider<TypeBoxTypeProvider>();
}

/**
 * The request and reply of a route declared with schema `S`, as the TypeBox provider types them:
 * what a named handler, written apart from its registration, takes. Its return value is checked
 * against `S.response` where it is registered.
 */
export type TypedRequest<S extends FastifySchema> = FastifyRequest<RouteGenericInterface, RawServerDefault, RawRequestDefaultExpression, S, TypeBoxTypeProvider>;
export type TypedReply<S extends FastifySchema> = FastifyReply<
  RouteGenericInterface,
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  ContextConfigDefault,
  S,
  TypeBoxTypeProvider
>;

/**
 * The schema of a route whose handler may answer by itself (an SSE stream, a hijacked reply) and
 * then returns the reply, as fastify asks of async handlers. Fastify still serializes its JSON
 * answers with `response`; only the types leave the handler's return open, since the type
 * provider cannot say "the response, or the reply".
 */
export function answersItself<S extends FastifySchema>(schema: S): Omit<S, 'response'> {
  return schema;
}

/** The fields of `PageQuery` (contracts), for a query that has more. */
export const PageQuery = PageQueryFields;

export interface Paged<T> {
  data: T[];
  total: number;
  page: number;
  size: number;
}

export function pageOf(query: { page?: number; size?: number }): { page: number; size: number; limit: number; offset: number } {
  const page = query.page ?? 1;
  const size = query.size ?? 20;
  return { page, size, limit: size, offset: (page - 1) * size };
}

/** The agent row, or 404 naming it. */
export async function requireAgent(db: Db, agentId: string): Promise<RuleChainRow> {
  const row = await getRuleChain(db, agentId);
  if (!row || row.kind !== 'agent') throw new Errors.NOT_FOUND(`agent "${agentId}"`);
  return row;
}

/** Rule chains (agents included) changed. */
export function publishChainChanges(deps: GatewayDeps, ids: readonly string[]): Promise<void> {
  return announceChange(deps.bus.pubsub, deps.logger, 'agents', ids);
}

/** Dates as ISO 8601 UTC (`2026-11-22T01:02:03.456Z`). */
export function iso(date: Date): string {
  return date.toISOString();
}
