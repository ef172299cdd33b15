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
