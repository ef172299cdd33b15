import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** The `fieldFilter` node as a definition holds it; what it does is the engine's `nodes/field-filter.ts`. */
export const fieldFilterSpec = defineNodeSpec({
  type: 'fieldFilter',
  description: 'routes True when the message has the named data and metadata fields, else False',
  configuration: Type.Object(
    {
      checkAllKeys: Type.Optional(Type.Boolean({ description: 'true: every field must be there; false: one is enough' })),
      dataNames: Type.Optional(Type.String({ maxLength: 4096, description: 'comma-separated keys of the data (a JSON object)' })),
      metadataNames: Type.Optional(Type.String({ maxLength: 4096, description: 'comma-separated metadata keys' })),
    },
    { additionalProperties: false },
  ),
});
