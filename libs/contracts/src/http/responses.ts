import Type, { type Static, type TSchema } from 'typebox';

/**
 * `POST /responses` (OpenAI's Responses API, text only): the `Response` object. Every field the
 * official type marks required is here, null where Agentry has nothing to say (no reasoning, no
 * tools, no truncation), so the OpenAI SDKs and OpenAI's own OpenAPI schema accept it.
 */

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const ResponseOutputText = Type.Object({
  type: Type.Literal('output_text'),
  text: Type.String(),
  annotations: Type.Array(Type.Unknown()),
  logprobs: Type.Array(Type.Unknown()),
});

export const ResponseOutputMessage = Type.Object({
  type: Type.Literal('message'),
  id: Type.String(),
  role: Type.Literal('assistant'),
  status: Type.Union([Type.Literal('in_progress'), Type.Literal('completed'), Type.Literal('incomplete')]),
  content: Type.Array(ResponseOutputText),
});
export type ResponseOutputMessage = Static<typeof ResponseOutputMessage>;

/** A call of one of the client's function tools: the response ends with it, for the client to run. */
export const ResponseFunctionCall = Type.Object({
  type: Type.Literal('function_call'),
  id: Type.String(),
  call_id: Type.String(),
  name: Type.String(),
  arguments: Type.String(),
  status: Type.Union([Type.Literal('in_progress'), Type.Literal('completed')]),
});
export type ResponseFunctionCall = Static<typeof ResponseFunctionCall>;

/** A client function tool as a `Response` echoes it (OpenAI's `FunctionTool`). */
export const ResponseFunctionTool = Type.Object({
  type: Type.Literal('function'),
  name: Type.String(),
  description: Nullable(Type.String()),
  parameters: Nullable(Type.Record(Type.String(), Type.Unknown())),
  strict: Nullable(Type.Boolean()),
});
export type ResponseFunctionTool = Static<typeof ResponseFunctionTool>;

export const ResponseUsage = Type.Object({
  input_tokens: Type.Integer(),
  input_tokens_details: Type.Object({ cached_tokens: Type.Integer(), cache_write_tokens: Type.Integer() }),
  output_tokens: Type.Integer(),
  output_tokens_details: Type.Object({ reasoning_tokens: Type.Integer() }),
  total_tokens: Type.Integer(),
});
export type ResponseUsage = Static<typeof ResponseUsage>;

/** `text.format` of a Responses request: what chat calls `response_format`, flattened. */
export const ResponseTextFormat = Type.Union([
  Type.Object({ type: Type.Literal('text') }),
  Type.Object({ type: Type.Literal('json_object') }),
  Type.Object({
    type: Type.Literal('json_schema'),
    name: Type.String({ minLength: 1, maxLength: 64 }),
    description: Type.Optional(Type.String()),
    schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  }),
]);
export type ResponseTextFormat = Static<typeof ResponseTextFormat>;

export const ResponseObject = Type.Object({
  id: Type.String(),
  object: Type.Literal('response'),
  created_at: Type.Integer(),
  completed_at: Nullable(Type.Integer()),
  /** `queued`/`in_progress` while the run goes on; `cancelled` after `POST /responses/{id}/cancel` (or a client gone). */
  status: Type.Union([Type.Literal('queued'), Type.Literal('in_progress'), Type.Literal('completed'), Type.Literal('failed'), Type.Literal('cancelled')]),
  /** Whether the response runs without its client (`background: true`). */
  background: Type.Boolean(),
  /** `code` is one of OpenAI's `ResponseErrorCode`s (`server_error` for every failure of a run). */
  error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
  incomplete_details: Type.Null(),
  instructions: Nullable(Type.String()),
  max_output_tokens: Nullable(Type.Integer()),
  /** The agent id. */
  model: Type.String(),
  output: Type.Array(Type.Union([ResponseOutputMessage, ResponseFunctionCall])),
  parallel_tool_calls: Type.Boolean(),
  previous_response_id: Nullable(Type.String()),
  reasoning: Type.Null(),
  store: Type.Boolean(),
  temperature: Nullable(Type.Number()),
  top_p: Nullable(Type.Number()),
  text: Type.Object({ format: ResponseTextFormat }),
  tool_choice: Type.Union([Type.Literal('auto'), Type.Literal('none'), Type.Literal('required'), Type.Object({ type: Type.Literal('function'), name: Type.String() })]),
  tools: Type.Array(ResponseFunctionTool),
  truncation: Type.Literal('disabled'),
  /** Absent until the response completes (OpenAI's schema has no null here, though its examples do). */
  usage: Type.Optional(ResponseUsage),
  metadata: Type.Record(Type.String(), Type.String()),
});
export type ResponseObject = Static<typeof ResponseObject>;

/** `DELETE /responses/{id}`: what OpenAI answers (its document gives no schema; the SDK's `void`). */
export const ResponseDeleted = Type.Object({ id: Type.String(), object: Type.Literal('response'), deleted: Type.Literal(true) });
export type ResponseDeleted = Static<typeof ResponseDeleted>;

/** An input item of a stored response, as `GET /responses/{id}/input_items` lists it (OpenAI's `ItemResource`). */
export const ResponseInputItem = Type.Union([
  Type.Object({
    type: Type.Literal('message'),
    id: Type.String(),
    role: Type.Union([Type.Literal('user'), Type.Literal('system'), Type.Literal('developer')]),
    status: Type.Literal('completed'),
    content: Type.Array(Type.Object({ type: Type.Literal('input_text'), text: Type.String() })),
  }),
  ResponseOutputMessage,
  ResponseFunctionCall,
  // OpenAI's `FunctionToolCallOutputItem`: the client's answer to one of its tool calls.
  Type.Object({
    type: Type.Literal('function_call_output'),
    id: Type.String(),
    call_id: Type.String(),
    output: Type.String(),
    status: Type.Literal('completed'),
  }),
]);
export type ResponseInputItem = Static<typeof ResponseInputItem>;

/** OpenAI's `ResponseItemList`. */
export const ResponseItemList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(ResponseInputItem),
  first_id: Nullable(Type.String()),
  last_id: Nullable(Type.String()),
  has_more: Type.Boolean(),
});
export type ResponseItemList = Static<typeof ResponseItemList>;

// Requests.

const OptionalNullable = <T extends TSchema>(t: T) => Type.Optional(Nullable(t));
/** POST /responses. */
export const ResponseCreateBody = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    // `input` is checked by the route: fastify's ajv would coerce inside a union.
    input: Type.Unknown(),
    instructions: OptionalNullable(Type.String()),
    stream: OptionalNullable(Type.Boolean()),
    store: OptionalNullable(Type.Boolean()),
    previous_response_id: OptionalNullable(Type.String({ minLength: 1, maxLength: 256 })),
    temperature: OptionalNullable(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: OptionalNullable(Type.Number({ minimum: 0, maximum: 1 })),
    max_output_tokens: OptionalNullable(Type.Integer({ minimum: 1 })),
    metadata: OptionalNullable(Type.Record(Type.String(), Type.String({ maxLength: 512 }), { maxProperties: 16 })),
    tools: Type.Optional(Type.Unknown()),
    tool_choice: Type.Optional(Type.Unknown()),
    parallel_tool_calls: Type.Optional(Type.Unknown()),
    text: Type.Optional(Type.Unknown()),
    background: Type.Optional(Type.Unknown()),
    conversation: Type.Optional(Type.Unknown()),
  },
  // OpenAI clients send more (user, parallel_tool_calls, truncation, ...): accepted and ignored.
  { additionalProperties: true },
);
export type ResponseCreateBody = Static<typeof ResponseCreateBody>;

export const ResponseParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) });
export type ResponseParams = Static<typeof ResponseParams>;
export const ResponseRetrieveQuery = Type.Object(
  {
    stream: Type.Optional(Type.Boolean()),
    starting_after: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  // `include`, `include_obfuscation`: accepted and ignored (nothing to include, nothing obfuscated).
  { additionalProperties: true },
);
export type ResponseRetrieveQuery = Static<typeof ResponseRetrieveQuery>;
export const ResponseInputItemsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  },
  { additionalProperties: true },
);
export type ResponseInputItemsQuery = Static<typeof ResponseInputItemsQuery>;
