import Type, { type Static } from 'typebox';
import { Closed, IsoDate, PageOf, PageQueryFields } from './common.js';

export const Session = Type.Object({
  id: Type.String(),
  agentId: Type.String(),
  sessionKey: Type.String(),
  channel: Type.String(),
  scope: Type.String(),
  /** The principal that opened it (`user:<name>`, `api:<account>`); '' for channel and open-mode chats. */
  owner: Type.String(),
  title: Type.String(),
  /** Every stored message, tool calls and results included. */
  messageCount: Type.Integer(),
  /** User and assistant messages with text: the conversation as a reader counts it. */
  turnCount: Type.Integer(),
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type Session = Static<typeof Session>;

export const SessionList = PageOf(Session);
export type SessionList = Static<typeof SessionList>;

export const SessionMessage = Type.Object({
  role: Type.String(),
  content: Type.String(),
  /** The assistant's tool calls as the model sent them. */
  toolCalls: Type.Optional(Type.Unknown()),
  toolCallId: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  runId: Type.Union([Type.String(), Type.Null()]),
  /** Only on a turn that ended without an answer: it failed, or its caller stopped it. Never sent to the model. */
  status: Type.Optional(Type.Union([Type.Literal('failed'), Type.Literal('stopped')])),
  /** Why that turn ended. */
  error: Type.Optional(Type.String()),
  createdAt: IsoDate,
  /** When a summary took its place in the model's context (absent: sent as it is, within the history window). */
  compactedAt: Type.Optional(IsoDate),
});
export type SessionMessage = Static<typeof SessionMessage>;

export const SessionMessages = Type.Array(SessionMessage);
export type SessionMessages = Static<typeof SessionMessages>;

/** `PATCH /sessions/{id}`: the owner's title for the conversation. */
export const SessionRename = Type.Object({ title: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false });
export type SessionRename = Static<typeof SessionRename>;

/** `POST /sessions/{id}/compact`: how many stored messages the summary now stands for, and the summary sent in their place. */
export const SessionCompaction = Type.Object({
  /** Messages marked compacted by this call (0: nothing older than the kept recent messages). */
  compacted: Type.Integer(),
  /** The session's summary after the call (null when it was never compacted). */
  summary: Type.Union([Type.String(), Type.Null()]),
});
export type SessionCompaction = Static<typeof SessionCompaction>;

// Requests.

export const SessionsClearBody = Type.Object(
  {
    agentId: Type.Optional(Type.String()),
    sessionKey: Type.Optional(Type.String()),
    channel: Type.Optional(Type.String()),
    scope: Type.Optional(Type.String()),
  },
  Closed,
);
export type SessionsClearBody = Static<typeof SessionsClearBody>;
export const SessionListQuery = Type.Object({
  agentId: Type.Optional(Type.String()),
  owner: Type.Optional(Type.String({ description: 'admins: only sessions of this principal (`user:<name>`, `api:<account>`, or empty for channels)' })),
  nonEmpty: Type.Optional(Type.Boolean({ description: 'true: leave out sessions without a stored message' })),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'only sessions whose title or key contains this text (any case)' })),
  ...PageQueryFields,
});
export type SessionListQuery = Static<typeof SessionListQuery>;
export const SessionParams = Type.Object({ id: Type.String({ description: "the session's id" }) });
export type SessionParams = Static<typeof SessionParams>;

/** The `{id}` of GET /sessions/{id}/messages that names a session by the client's key instead of Agentry's id. */
export const SESSION_BY_KEY = '-';
export const SessionMessagesParams = Type.Object({ id: Type.String({ description: `the session's id, or "${SESSION_BY_KEY}" to name it by agentId and sessionKey` }) });
export type SessionMessagesParams = Static<typeof SessionMessagesParams>;
export const SessionMessagesQuery = Type.Object({
  agentId: Type.Optional(Type.String({ description: `with id "${SESSION_BY_KEY}": the agent of the session` })),
  sessionKey: Type.Optional(Type.String({ description: `with id "${SESSION_BY_KEY}": the chat request's sessionId (or a channel's session key)` })),
  channel: Type.Optional(Type.String({ description: `with id "${SESSION_BY_KEY}": where the session came from; default api` })),
  owner: Type.Optional(Type.String({ description: `with id "${SESSION_BY_KEY}", admins: whose session (\`user:<name>\`, \`api:<account>\`, empty for channels); default the caller's` })),
});
export type SessionMessagesQuery = Static<typeof SessionMessagesQuery>;
