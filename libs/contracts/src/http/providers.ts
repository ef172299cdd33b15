import Type, { type Static } from 'typebox';

/**
 * Model providers under `/config/models` (spec "Model provider", "Model configuration"). The
 * API key is write-only: a provider shows only whether it has one (`hasApiKey`).
 */

export const ProviderModel = Type.Object({
  name: Type.String(),
  /** `default` marks the provider's default model. */
  alias: Type.Optional(Type.String()),
  context_window: Type.Optional(Type.Integer()),
});
export type ProviderModel = Static<typeof ProviderModel>;

export const ModelProvider = Type.Object({
  id: Type.String(),
  name: Type.String(),
  base_url: Type.String(),
  /** The default model: `model`, else the `models` entry aliased `default`, else the first. */
  model: Type.String(),
  models: Type.Array(ProviderModel),
  hasApiKey: Type.Boolean(),
});
export type ModelProvider = Static<typeof ModelProvider>;

export const ModelProviderList = Type.Array(ModelProvider);
export type ModelProviderList = Static<typeof ModelProviderList>;

/** `GET /config/models`: the default provider's id and every provider. */
export const ModelsOverview = Type.Object({
  default_provider: Type.String(),
  providers: ModelProviderList,
});
export type ModelsOverview = Static<typeof ModelsOverview>;

/** A connection test: a failing provider is an answer too (`ok: false`, `error`), never a key. */
export const ProviderTestResult = Type.Object({
  ok: Type.Boolean(),
  latencyMs: Type.Integer(),
  /** `models`: GET /models answered; `chat`: a one-token chat completion answered. */
  method: Type.Union([Type.Literal('models'), Type.Literal('chat')]),
  /** Model ids the provider listed (the first 100), when it lists them. */
  models: Type.Optional(Type.Array(Type.String())),
  error: Type.Optional(Type.String()),
});
export type ProviderTestResult = Static<typeof ProviderTestResult>;
