import Type, { type Static } from 'typebox';

export const ReadyCheck = Type.Object({ ok: Type.Boolean(), ms: Type.Number(), error: Type.Optional(Type.String()) });
export type ReadyCheck = Static<typeof ReadyCheck>;

/** `GET /ready` when ready; a 503 is `{error, checks}`. */
export const ReadyReport = Type.Object({ status: Type.Literal('ready'), checks: Type.Record(Type.String(), ReadyCheck) });
export type ReadyReport = Static<typeof ReadyReport>;

export const NotReadyReport = Type.Object({ error: Type.String(), checks: Type.Record(Type.String(), ReadyCheck) });
export type NotReadyReport = Static<typeof NotReadyReport>;
