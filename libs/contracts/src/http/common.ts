import Type, { type Static, type TSchema } from 'typebox';

/**
 * Shapes every family of the REST API shares. Response schemas are the contract: the gateway
 * serializes each answer with its route's schema (so a field a schema leaves out is not sent),
 * the OpenAPI document shows them, and `@agentry/client` derives its types from them.
 */

/** Every error answer (spec "Errors"). */
export const ErrorBody = Type.Object({ error: Type.String() }, { additionalProperties: false });
export type ErrorBody = Static<typeof ErrorBody>;

/**
 * The error answer of the OpenAI-compatible routes (`/chat/completions`, `/responses`, `/models`):
 * OpenAI's own object, which its clients (the SDKs, the AI SDK, LangChain) read their message,
 * type and code from. The management API keeps `ErrorBody`.
 */
export const OpenAIErrorBody = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String(),
      param: Type.Union([Type.String(), Type.Null()]),
      code: Type.Union([Type.String(), Type.Null()]),
    }),
  },
  { additionalProperties: false },
);
export type OpenAIErrorBody = Static<typeof OpenAIErrorBody>;

/** `{success: true}` of deletes and actions; `message` when there is something to say. */
export const SuccessBody = Type.Object({ success: Type.Boolean(), message: Type.Optional(Type.String()) });
export type SuccessBody = Static<typeof SuccessBody>;

/** A paged list: `page` >= 1, `size` 1..100, `total` over every page. */
export function PageOf<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), total: Type.Integer(), page: Type.Integer(), size: Type.Integer() });
}
export interface Page<T> {
  data: T[];
  total: number;
  page: number;
  size: number;
}

/** A timestamp as ISO 8601 UTC (`2026-11-22T01:02:03.456Z`). */
export const IsoDate = Type.String({ format: 'date-time' });

/**
 * Request schemas sit beside the answers they lead to, one family a module: `XBody` is what a
 * route takes as its body, `XQuery` its query string, `XParams` its path. A closed body (no
 * field it does not name) refuses a misspelt field with a 400 naming it instead of dropping it.
 */
export const Closed = { additionalProperties: false } as const;

/** Ids of agents, rule chains and providers in a path: letters, digits, `_` and `-`, 1 to 64 (the DSL's rule). */
export const ResourceId = Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'letters, digits, _ and -, 1 to 64 characters' });

/**
 * `page` (1..1,000,000, default 1) and `size` (1..100, default 20); anything else is a 400. The
 * bound on page keeps the row offset a number the database takes (page 1e20 would overflow it).
 */
export const PageQueryFields = {
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
};
export const PageQuery = Type.Object(PageQueryFields);
export type PageQuery = Static<typeof PageQuery>;

/** `/agents/{agentId}/...` */
export const AgentParams = Type.Object({ agentId: ResourceId });
export type AgentParams = Static<typeof AgentParams>;
