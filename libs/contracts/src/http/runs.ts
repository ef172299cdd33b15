import Type, { type Static } from 'typebox';
import { Closed, PageOf, type Page } from './common.js';

/**
 * An agent's runs (`GET /agents/{agentId}/runs`): what happened, never what was answered; what
 * was asked only as `firstWords`, and only to whom the steps' messages are shown (the run's own
 * principal and admins): a run of another user's session is listed to the agent's owner without it.
 */
export const RunSummary = Type.Object({
  id: Type.String(),
  status: Type.String({ description: 'queued | running | succeeded | failed | cancelled' }),
  source: Type.String({ description: 'api, cron, or the channel platform (chat_a..chat_e)' }),
  createdAt: Type.String(),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  durationMs: Type.Union([Type.Integer(), Type.Null()], { description: 'created to finished; null while it runs' }),
  hasSteps: Type.Boolean({ description: 'the run ran as a rule chain and its steps were recorded' }),
  error: Type.Union([Type.String(), Type.Null()], { description: "why the run failed; \"failed\" alone when the run is another principal's and the caller is not an admin (an error can quote the message)" }),
  firstWords: Type.Optional(
    Type.String({
      description:
        "the start (up to 120 characters) of the user message the run answered, '' when it had none; left out when the run is another principal's and the caller is not an admin",
    }),
  ),
});
export type RunSummary = Static<typeof RunSummary>;

export const RunSummaryPage = PageOf(RunSummary);
export type RunSummaryPage = Page<RunSummary>;

/**
 * The `type` of the step a run notes for a tool the authority policy left out. Its `error` quotes
 * only the agent owner's own configuration (another owner's sub-agent is only named), never what
 * was sent, so the agent's owner reads it on anyone's run.
 */
export const REFUSED_TOOL_STEP = 'tool refused';

/** One node execution of a run's chain (the engine's chain trace entry), or a noted refusal (`REFUSED_TOOL_STEP`). */
export const RunStep = Type.Object({
  nodeId: Type.String(),
  type: Type.String(),
  relations: Type.Array(Type.String(), { description: 'the relations the node chose (Failure after an error)' }),
  ms: Type.Number(),
  error: Type.Optional(
    Type.String({ description: "what the node failed with; \"failed\" alone when the run is another principal's (an error can quote the message)" }),
  ),
  debug: Type.Optional(
    Type.Object(
      {
        chainId: Type.String(),
        in: Type.Optional(Type.Unknown()),
        out: Type.Optional(Type.Unknown()),
        redacted: Type.Optional(Type.Boolean({ description: 'true: `in` and `out` are left out (the run is another principal\'s)' })),
      },
      {
        description:
          "with debugMode: the message the node got and the one it passed on (over 64 KiB: {truncated, chars, preview}); only the run's own principal and admins see them, anyone else gets `{chainId, redacted: true}`",
      },
    ),
  ),
});
export type RunStep = Static<typeof RunStep>;

/** `GET /runs/{runId}/steps`: empty `steps` with `recorded: false` for a run that did not run as a chain. */
export const RunSteps = Type.Object({
  runId: Type.String(),
  agentId: Type.String(),
  status: Type.String(),
  recorded: Type.Boolean(),
  redacted: Type.Boolean({
    description: "true: the run is another principal's (the caller owns the agent, not the conversation): debug messages are left out, the steps' structure stays",
  }),
  steps: Type.Array(RunStep),
});
export type RunSteps = Static<typeof RunSteps>;

/** POST /runs/{runId}/cancel. */
export const RunCancelResult = Type.Object(
  {
    runId: Type.String(),
    status: Type.String({ description: 'the run status after the call: `cancelled`, or how it had already ended' }),
  },
  Closed,
);
export type RunCancelResult = Static<typeof RunCancelResult>;

// Requests.

export const RunParams = Type.Object({ runId: Type.String() });
export type RunParams = Static<typeof RunParams>;
/** GET /agents/{agentId}/runs names the agent without the id rule: an unknown one is a 404, not a 400. */
export const AgentRunsParams = Type.Object({ agentId: Type.String() });
export type AgentRunsParams = Static<typeof AgentRunsParams>;
export const RunEventsQuery = Type.Object(
  {
    after: Type.Optional(Type.Integer({ minimum: -1, maximum: 999_999_999, description: 'the seq of the last event the client has (the number after the colon of an `id:` line); -1 or absent: from the start' })),
    include_usage: Type.Optional(Type.Boolean({ description: 'end with the usage chunk, as `stream_options.include_usage` does' })),
  },
  Closed,
);
export type RunEventsQuery = Static<typeof RunEventsQuery>;
