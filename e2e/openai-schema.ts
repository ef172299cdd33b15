import fs from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { expect } from 'vitest';

/**
 * The OpenAI API's own answer schemas (`e2e/fixtures/openai-schemas.json`: the `components.schemas`
 * of github.com/openai/openai-openapi reachable from the chat, models, Responses and error
 * answers), so the suites check every body a client reads against what the official SDKs are
 * generated from, not against our idea of it.
 */
const DOCUMENT_ID = 'openai';
const document = JSON.parse(fs.readFileSync(new URL('./fixtures/openai-schemas.json', import.meta.url), 'utf8')) as {
  components: { schemas: Record<string, unknown> };
};

/**
 * A few schemas of the document still say `nullable: true` the OpenAPI 3.0 way, some beside no
 * `type` (ajv refuses that): each becomes "this schema, or null", what it means.
 */
function withNullables(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withNullables);
  if (!node || typeof node !== 'object') return node;
  const { nullable, ...rest } = node as Record<string, unknown>;
  const walked = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, withNullables(v)]));
  return nullable === true ? { anyOf: [walked, { type: 'null' }] } : walked;
}

// OpenAPI 3.1 schemas are JSON Schema 2020-12 plus keywords of its own (`x-oaiMeta`,
// `discriminator`, formats such as `unixtime`): not strict, and formats are not checked.
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(withNullables(document) as object, DOCUMENT_ID);
const compiled = new Map<string, ValidateFunction>();

type Schemas = Record<string, { anyOf?: Array<{ $ref?: string }>; properties?: { type?: { enum?: unknown[] } } }>;

/**
 * The member of a union like `ResponseStreamEvent` that a body's `type` names: a failure is then
 * reported against that one schema, not as every member's complaint at once.
 */
function memberFor(name: string, body: unknown): string {
  const schemas = document.components.schemas as Schemas;
  const type = (body as { type?: unknown } | null)?.type;
  for (const ref of schemas[name]?.anyOf ?? []) {
    const member = ref.$ref?.split('/').pop();
    if (member && schemas[member]?.properties?.type?.enum?.includes(type)) return member;
  }
  return name;
}

function validatorOf(schemaName: string): ValidateFunction {
  let validate = compiled.get(schemaName);
  if (!validate) {
    if (!(schemaName in document.components.schemas)) throw new Error(`no OpenAI schema named ${schemaName} in e2e/fixtures/openai-schemas.json`);
    validate = ajv.getSchema(`${DOCUMENT_ID}#/components/schemas/${schemaName}`);
    if (!validate) throw new Error(`the OpenAI schema ${schemaName} did not compile`);
    compiled.set(schemaName, validate);
  }
  return validate;
}

/** Fails the test, naming each violation, unless `body` is valid against OpenAI's schema `schemaName`. */
export function assertValid(schemaName: string, body: unknown): void {
  const member = memberFor(schemaName, body);
  const validate = validatorOf(member);
  const valid = validate(body);
  const problems = (validate.errors ?? []).slice(0, 20).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
  const named = member === schemaName ? schemaName : `${schemaName} (${member})`;
  expect(valid, `not a valid OpenAI ${named}:\n${problems.join('\n')}\n${JSON.stringify(body).slice(0, 2000)}`).toBe(true);
}
