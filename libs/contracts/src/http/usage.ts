import Type, { type Static } from 'typebox';

/**
 * A principal's budget (an api account's or a user's): tokens per UTC day and requests per
 * minute; a limit left out or 0 is no limit.
 */
export const Budget = Type.Object(
  {
    tokensPerDay: Type.Optional(Type.Integer({ minimum: 0, description: 'prompt + completion tokens per UTC day; 0: no limit' })),
    requestsPerMinute: Type.Optional(Type.Integer({ minimum: 0, description: 'chat and responses requests per minute; 0: no limit' })),
  },
  { additionalProperties: false },
);
export type Budget = Static<typeof Budget>;

export const UsageGroupBy = Type.Union([Type.Literal('agent'), Type.Literal('principal'), Type.Literal('provider'), Type.Literal('day'), Type.Literal('kind')], {
  description: 'kind: what the model calls were for (chat, or compaction: session summaries)',
});
export type UsageGroupBy = Static<typeof UsageGroupBy>;

/** Totals of one group: an agent id, a principal (`user:<name>`, `api:<account>`, `channel:<platform>:<account>:<peer>`, ''), a provider, or a UTC day (`YYYY-MM-DD`). */
export const UsageRow = Type.Object({
  key: Type.String(),
  promptTokens: Type.Integer(),
  completionTokens: Type.Integer(),
  totalTokens: Type.Integer(),
  /** Model calls. */
  requests: Type.Integer(),
});
export type UsageRow = Static<typeof UsageRow>;

/** `GET /usage`: totals over [from, to) by the group asked for. */
export const UsageReport = Type.Object({
  data: Type.Array(UsageRow),
  from: Type.String({ description: 'ISO 8601, inclusive' }),
  to: Type.String({ description: 'ISO 8601, exclusive' }),
  groupBy: UsageGroupBy,
});
export type UsageReport = Static<typeof UsageReport>;

// Requests.

export const UsageQuery = Type.Object({
  groupBy: Type.Optional(UsageGroupBy),
  from: Type.Optional(Type.String({ description: 'ISO 8601 date or time, inclusive; default 30 days before `to`' })),
  to: Type.Optional(Type.String({ description: 'ISO 8601 time, exclusive, or a date, the whole day included; default now' })),
  principal: Type.Optional(Type.String({ description: 'admins: only this principal (`user:<name>`, `api:<account>`, empty for channels and cron)' })),
});
export type UsageQuery = Static<typeof UsageQuery>;
