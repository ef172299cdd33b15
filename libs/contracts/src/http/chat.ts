import Type, { type Static } from 'typebox';

/** `GET /models` (OpenAI's model list): one entry per agent the caller may chat with; `GET /models/{id}` answers one. */
export const ModelInfo = Type.Object({ id: Type.String(), object: Type.Literal('model'), created: Type.Integer(), owned_by: Type.String() });
export type ModelInfo = Static<typeof ModelInfo>;

export const ModelList = Type.Object({ object: Type.Literal('list'), data: Type.Array(ModelInfo) });
export type ModelList = Static<typeof ModelList>;
