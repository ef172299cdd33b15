import Type, { type Static } from 'typebox';

/**
 * Events of one run, published by the agent-worker on the pub/sub channel `run:<runId>` and
 * relayed by the gateway. `seq` is monotonic per run starting at 0, so that the relay can
 * detect a gap and fail the stream instead of emitting a corrupted answer.
 */
const base = { runId: Type.String(), seq: Type.Integer({ minimum: 0 }) };

export const ToolType = Type.Union([
  Type.Literal('builtin'),
  Type.Literal('rulechain'),
  Type.Literal('subagent'),
  Type.Literal('mcp'),
]);
export type ToolType = Static<typeof ToolType>;

export const RunEvent = Type.Union([
  Type.Object({ ...base, type: Type.Literal('text'), text: Type.String() }),
  Type.Object({
    ...base,
    type: Type.Literal('tool_start'),
    toolCallId: Type.String(),
    toolName: Type.String(),
    toolType: ToolType,
    arguments: Type.String(),
  }),
  Type.Object({
    ...base,
    type: Type.Literal('tool_result'),
    toolCallId: Type.String(),
    toolName: Type.String(),
    toolType: ToolType,
    content: Type.String(),
    isError: Type.Optional(Type.Boolean()),
  }),
  Type.Object({
    ...base,
    type: Type.Literal('done'),
    finishReason: Type.String(),
    /**
     * When the run was finished (unix seconds), as stored: a resumed or replayed stream tells the
     * same `completed_at` as the first. Absent from workers older than this field.
     */
    finishedAt: Type.Optional(Type.Integer()),
    /** With finishReason `tool_calls`: the calls of the client's tools the run ended with. */
    toolCalls: Type.Optional(Type.Array(Type.Object({ id: Type.String(), name: Type.String(), arguments: Type.String() }))),
    usage: Type.Optional(
      Type.Object({
        promptTokens: Type.Integer(),
        completionTokens: Type.Integer(),
        totalTokens: Type.Integer(),
      }),
    ),
  }),
  Type.Object({ ...base, type: Type.Literal('error'), message: Type.String(), status: Type.Optional(Type.Integer()) }),
  /**
   * A model call failed before its first token and is tried again: attempt `attempt` of `of`.
   * Progress for the person waiting, not part of the answer: it consumes no seq (it carries the
   * seq the next event will have), so it never counts as output for a take-over or a resume.
   */
  Type.Object({
    ...base,
    type: Type.Literal('retry'),
    attempt: Type.Integer({ minimum: 2 }),
    of: Type.Integer({ minimum: 2 }),
    reason: Type.String(),
  }),
]);
export type RunEvent = Static<typeof RunEvent>;
export type RunEventType = RunEvent['type'];
