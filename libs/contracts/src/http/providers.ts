import Type, { type Static } from 'typebox';
import { Closed, ResourceId } from './common.js';

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

// Requests.

const ProviderModelInput = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 256 }),
    alias: Type.Optional(Type.String({ maxLength: 256 })),
    context_window: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  Closed,
);
const BaseUrl = Type.String({ pattern: '^https?://', maxLength: 2048, description: 'http(s) URL of the OpenAI-compatible API' });
// Sent as an HTTP header: anything beyond visible ASCII could never reach the provider.
const ApiKey = Type.String({ minLength: 1, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$', description: 'write-only: sealed at rest, never returned; visible ASCII' });
const providerFields = {
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  model: Type.Optional(Type.String({ maxLength: 256, description: 'default model name' })),
  models: Type.Optional(Type.Array(ProviderModelInput, { maxItems: 1000 })),
};

/** A new provider's fields, as `models.providers.<id>` of `PUT /config` takes them too. */
export const ProviderCreateFields = Type.Object({ id: Type.Optional(ResourceId), base_url: BaseUrl, api_key: Type.Optional(ApiKey), ...providerFields }, Closed);
export const ProviderCreateBody = Type.Object(
  {
    ...ProviderCreateFields.properties,
    default: Type.Optional(Type.Boolean({ description: 'make it models.default_provider (the first provider becomes the default anyway)' })),
  },
  Closed,
);
export type ProviderCreateBody = Static<typeof ProviderCreateBody>;
/** A provider's change, as `models.providers.<id>` of `PUT /config` takes it for one that exists. */
export const ProviderUpdateBody = Type.Object(
  {
    id: Type.Optional(Type.String()),
    base_url: Type.Optional(BaseUrl),
    // null removes the key.
    api_key: Type.Optional(Type.Union([ApiKey, Type.Null()])),
    ...providerFields,
  },
  Closed,
);
export type ProviderUpdateBody = Static<typeof ProviderUpdateBody>;
export const ProviderApiKeyBody = Type.Object({ apiKey: ApiKey }, Closed);
export type ProviderApiKeyBody = Static<typeof ProviderApiKeyBody>;
/** PUT /config/models: the default provider set up in one call. */
export const ModelsQuickSetupBody = Type.Object(
  {
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    api_key: Type.Optional(ApiKey),
    base_url: Type.Optional(BaseUrl),
    default: Type.Optional(Type.Boolean()),
  },
  Closed,
);
export type ModelsQuickSetupBody = Static<typeof ModelsQuickSetupBody>;
export const ProviderParams = Type.Object({ name: ResourceId });
export type ProviderParams = Static<typeof ProviderParams>;
