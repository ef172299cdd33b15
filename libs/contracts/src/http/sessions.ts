import Type, { type Static } from 'typebox';
import { IsoDate, PageOf } from './common.js';

export const Session = Type.Object({
  id: Type.String(),
  agentId: Type.String(),
  sessionKey: Type.String(),
  channel: Type.String(),
  scope: Type.String(),
  /** The principal that opened it (`user:<name>`, `api:<account>`); '' for channel and open-mode chats. */
  owner: Type.String(),
  title: Type.String(),
  messageCount: Type.Integer(),
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
  createdAt: IsoDate,
  /** When a summary took its place in the model's context (absent: sent as it is, within the history window). */
  compactedAt: Type.Optional(IsoDate),
});
export type SessionMessage = Static<typeof SessionMessage>;

export const SessionMessages = Type.Array(SessionMessage);
export type SessionMessages = Static<typeof SessionMessages>;

/** `POST /sessions/{id}/compact`: how many stored messages the summary now stands for, and the summary sent in their place. */
export const SessionCompaction = Type.Object({
  /** Messages marked compacted by this call (0: nothing older than the kept recent messages). */
  compacted: Type.Integer(),
  /** The session's summary after the call (null when it was never compacted). */
  summary: Type.Union([Type.String(), Type.Null()]),
});
export type SessionCompaction = Static<typeof SessionCompaction>;
