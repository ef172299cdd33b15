import Type, { type Static } from 'typebox';
import { Closed, ResourceId } from './common.js';
import { ProviderUpdateBody } from './providers.js';

/**
 * `GET /config` (and `PUT /config`'s answer): the live configuration, secrets hidden. The spec's
 * table names the fields below; each section is open, so what the configuration grows is sent
 * without touching this schema.
 */
const Open = { additionalProperties: true } as const;

export const ConfigProvider = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    base_url: Type.String(),
    model: Type.String(),
    models: Type.Array(Type.Object({ name: Type.String(), alias: Type.Optional(Type.String()) }, Open)),
  },
  Open,
);
export type ConfigProvider = Static<typeof ConfigProvider>;

export const ConfigDocument = Type.Object(
  {
    server: Type.Object({ host: Type.String(), port: Type.Integer() }, Open),
    data: Type.Object({ root_dir: Type.String(), logs_dir: Type.String() }, Open),
    models: Type.Object({ default_provider: Type.String(), providers: Type.Record(Type.String(), ConfigProvider) }, Open),
    /** `users`: username to `true`; passwords and keys are never sent. */
    /** `allowFrom`: the client-address allow-lists (CIDRs); an empty list allows every address. */
    security: Type.Object(
      {
        requireAuth: Type.Boolean(),
        users: Type.Record(Type.String(), Type.Boolean()),
        allowFrom: Type.Object({ management: Type.Array(Type.String()), chat: Type.Array(Type.String()) }, Open),
      },
      Open,
    ),
  },
  Open,
);
export type ConfigDocument = Static<typeof ConfigDocument>;

/**
 * The `models` section of `PUT /config` as the OpenAPI document shows it: the settings, and the
 * providers the route writes to their own table. The rest of the patch is the configuration
 * schema's (`ConfigPatch`, @agentry/runtime), which checks it with messages that name the key.
 */
export const ConfigModelsPatch = Type.Object(
  {
    default_provider: Type.Optional(Type.String()),
    providers: Type.Optional(
      Type.Record(ResourceId, ProviderUpdateBody, {
        description: 'providers to add (base_url required) or change, keyed by id; api_key is write-only',
      }),
    ),
  },
  Closed,
);
