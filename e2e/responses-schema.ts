import fs from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';

/**
 * OpenAI's own OpenAPI schemas (the `components.schemas` reachable from `Response` and
 * `ResponseStreamEvent`, fixture in fixtures/openai-schemas.json), so the Responses API tests check
 * bodies and stream events against the published contract, not only against what the SDK reads.
 */

const DOC_ID = 'https://agentry.test/openai-schemas.json';
const doc = JSON.parse(fs.readFileSync(new URL('./fixtures/openai-schemas.json', import.meta.url), 'utf8')) as Record<string, unknown>;

// strict: false: the document carries OpenAPI keywords (x-stainless-*, example, discriminator)
// that are annotations, not JSON Schema; formats like `unixtime` are OpenAI's own, not checked.
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema({ ...doc, $id: DOC_ID });

const validators = new Map<string, ReturnType<typeof ajv.compile>>();

type SchemaDoc = { components: { schemas: Record<string, { anyOf?: Array<{ $ref?: string }>; properties?: { type?: { enum?: unknown[] } } }> } };

/**
 * The member of a union like `ResponseStreamEvent` that an event's `type` names: a failure is
 * then reported against that one schema, not as every member's complaint at once.
 */
function memberFor(name: string, body: unknown): string {
  const schemas = (doc as SchemaDoc).components.schemas;
  const type = (body as { type?: unknown } | null)?.type;
  for (const ref of schemas[name]?.anyOf ?? []) {
    const member = ref.$ref?.split('/').pop();
    if (member && schemas[member]?.properties?.type?.enum?.includes(type)) return member;
  }
  return name;
}

/** Throws, listing every violation, when `body` is not valid against OpenAI's schema `name`. */
export function assertValid(schema: string, body: unknown): void {
  const name = memberFor(schema, body);
  let validate = validators.get(name);
  if (!validate) {
    validate = ajv.compile({ $ref: `${DOC_ID}#/components/schemas/${name}` });
    validators.set(name, validate);
  }
  if (validate(body)) return;
  const errors = (validate.errors ?? []).slice(0, 20).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
  throw new Error(`not a valid OpenAI ${schema} (${name}):\n${errors.join('\n')}\n${JSON.stringify(body).slice(0, 2000)}`);
}
