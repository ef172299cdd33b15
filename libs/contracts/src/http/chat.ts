import Type, { type Static, type TSchema } from 'typebox';

/** `GET /models` (OpenAI's model list): one entry per agent the caller may chat with; `GET /models/{id}` answers one. */
export const ModelInfo = Type.Object({ id: Type.String(), object: Type.Literal('model'), created: Type.Integer(), owned_by: Type.String() });
export type ModelInfo = Static<typeof ModelInfo>;

export const ModelList = Type.Object({ object: Type.Literal('list'), data: Type.Array(ModelInfo) });
export type ModelList = Static<typeof ModelList>;

// Requests.

const ChatRole = Type.Union([Type.Literal('system'), Type.Literal('developer'), Type.Literal('user'), Type.Literal('assistant'), Type.Literal('tool')]);
/** OpenAI sends null for a field it leaves at its default: taken as absent. */
const OptionalNullable = <T extends TSchema>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));
// `content` and `stop` are checked by the route: fastify's ajv coerces types, and inside a union
// it would turn 42 into "42" or ["END"] into "END" instead of refusing or keeping them.
const ChatMessageInput = Type.Object({ role: ChatRole, content: Type.Optional(Type.Unknown()) }, { additionalProperties: true });
/** POST /chat/completions. */
export const ChatCompletionBody = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    messages: Type.Array(ChatMessageInput, { minItems: 1 }),
    stream: OptionalNullable(Type.Boolean()),
    stream_options: OptionalNullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, { additionalProperties: true })),
    sessionId: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    temperature: OptionalNullable(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: OptionalNullable(Type.Number({ minimum: 0, maximum: 1 })),
    max_tokens: OptionalNullable(Type.Integer({ minimum: 1 })),
    max_completion_tokens: OptionalNullable(Type.Integer({ minimum: 1 })),
    stop: Type.Optional(Type.Unknown()),
    // Checked by the route like `content`: a union of objects would be coerced, not refused.
    response_format: Type.Optional(Type.Unknown()),
    n: OptionalNullable(Type.Integer({ minimum: 1 })),
    user: OptionalNullable(Type.String({ maxLength: 256 })),
    tools: Type.Optional(Type.Unknown()),
    tool_choice: Type.Optional(Type.Unknown()),
    parallel_tool_calls: Type.Optional(Type.Unknown()),
    functions: Type.Optional(Type.Unknown()),
    function_call: Type.Optional(Type.Unknown()),
  },
  // Other OpenAI fields (seed, logprobs, metadata, ...) are accepted and ignored: the README's
  // table "Where Agentry differs from the OpenAI API" says which and why.
  { additionalProperties: true },
);
export type ChatCompletionBody = Static<typeof ChatCompletionBody>;

/** GET /models/{id}. */
export const ModelParams = Type.Object({ id: Type.String({ minLength: 1 }) });
export type ModelParams = Static<typeof ModelParams>;
