import Type, { type Static } from 'typebox';

/**
 * What a run was asked, as the gateway stores it on the run row (the job carries only the id).
 * Messages are normalised to text; `system` messages add to the agent's instructions.
 */
/** One call of a client's tool, as OpenAI's assistant message `tool_calls` holds it. */
export const RunToolCall = Type.Object({
  id: Type.String({ minLength: 1 }),
  type: Type.Literal('function'),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});
export type RunToolCall = Static<typeof RunToolCall>;

export const RunMessage = Type.Object({
  role: Type.Union([Type.Literal('system'), Type.Literal('user'), Type.Literal('assistant'), Type.Literal('tool')]),
  content: Type.String(),
  /** An assistant message's calls of the client's tools (the client sends the exchange back). */
  tool_calls: Type.Optional(Type.Array(RunToolCall)),
  /** A tool message: the call it answers. */
  tool_call_id: Type.Optional(Type.String()),
});
export type RunMessage = Static<typeof RunMessage>;

/** Where a run's answer goes besides the run row: a channel chat (inbound messages, cron deliveries). */
export const RunReply = Type.Object({
  platform: Type.String({ minLength: 1 }),
  accountId: Type.String({ minLength: 1 }),
  chatId: Type.String({ minLength: 1 }),
});
export type RunReply = Static<typeof RunReply>;

/**
 * OpenAI's `response_format` of a chat request, handed to the agent's model call as given
 * (`{type: 'text'}`, the default, is never sent).
 */
export const ResponseFormat = Type.Union([
  Type.Object({ type: Type.Literal('json_object') }),
  Type.Object({
    type: Type.Literal('json_schema'),
    json_schema: Type.Object({
      name: Type.String({ minLength: 1, maxLength: 64 }),
      description: Type.Optional(Type.String()),
      schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    }),
  }),
]);
export type ResponseFormat = Static<typeof ResponseFormat>;

/**
 * A function tool of the client (OpenAI's chat `tools[].function`): offered to the model beside
 * the agent's own; a call of it ends the run with the call, for the client to run.
 */
export const ClientTool = Type.Object({
  name: Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' }),
  description: Type.Optional(Type.String()),
  parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
});
export type ClientTool = Static<typeof ClientTool>;

/** OpenAI's `tool_choice`, checked against the request's client tools by the gateway. */
export const ToolChoice = Type.Union([
  Type.Literal('none'),
  Type.Literal('auto'),
  Type.Literal('required'),
  Type.Object({ type: Type.Literal('function'), function: Type.Object({ name: Type.String() }) }),
]);
export type ToolChoice = Static<typeof ToolChoice>;

export const RunRequest = Type.Object({
  messages: Type.Array(RunMessage),
  reply: Type.Optional(RunReply),
  /**
   * Which of the messages a session keeps as this turn: the trailing user messages (default:
   * chat clients resend the whole conversation, the session already holds the rest), or all but
   * `system` (the Responses API sends only new items, earlier ones included). Kept with the
   * answer in one commit, so a failed turn leaves none of them behind.
   */
  sessionTurns: Type.Optional(Type.Union([Type.Literal('trailing'), Type.Literal('all')])),
  /**
   * The client reads the answer as a stream: the worker keeps the run's events for a resume
   * (a non-streamed answer has no event ids to resume from, and keeping costs Redis commands).
   */
  stream: Type.Optional(Type.Boolean()),
  /** The client's own function tools (issue 38); their calls end the run for the client to answer. */
  clientTools: Type.Optional(Type.Array(ClientTool)),
  /** OpenAI's `tool_choice` for the turn's first model call (later steps are `auto`). */
  toolChoice: Type.Optional(ToolChoice),
  /** OpenAI's `parallel_tool_calls`, passed to every model call of the turn. */
  parallelToolCalls: Type.Optional(Type.Boolean()),
  /**
   * The run lives without its client (a Responses `background: true` request): no worker cancels
   * it for nobody listening; only an explicit cancel (`POST /responses/{id}/cancel`) ends it early.
   */
  background: Type.Optional(Type.Boolean()),
  /**
   * What a Responses API request asked for, echoed by `GET /responses/{id}` (model, instructions,
   * metadata, text format, the input items' roles...); the gateway's own, the worker ignores it.
   */
  response: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  params: Type.Optional(
    Type.Object({
      temperature: Type.Optional(Type.Number()),
      top_p: Type.Optional(Type.Number()),
      max_tokens: Type.Optional(Type.Integer()),
      stop: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
      response_format: Type.Optional(ResponseFormat),
    }),
  ),
});
export type RunRequest = Static<typeof RunRequest>;
