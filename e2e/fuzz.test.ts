import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { startAgentWorker } from '@agentry/agent-worker';
import { createMemoryBus } from '@agentry/bus';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, describeWithServers, rawZip, startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';

/**
 * Fuzzing every route of the OpenAPI document (`GET /api/v1/openapi.json`): requests generated
 * from each operation's schemas with fast-check, valid-ish first, then mutated (wrong types,
 * missing and extra fields, huge strings, deep JSON, hostile unicode, bad path and query values,
 * wrong content types, malformed JSON, bad multipart). Properties, for every case: no 5xx, every
 * error body is exactly `{error: string}` (OpenAI's error object on the OpenAI-compatible routes) with no stack trace or file path, the server survives,
 * and what valid cases changed leaves the service usable for the next ones.
 *
 * The seed is fixed under CI and random otherwise; it is printed with every failure, and
 * `FUZZ_SEED=<n>` replays a run. Raise the case counts below to fuzz harder locally.
 */
const CASES_PER_AUTH_MODE = 8000;
const CLUSTER_CASES = 2500;
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : process.env.CI ? 13_2026 : Math.floor(Math.random() * 2 ** 31);

/** Small, so that bodies beyond it are cheap to send. */
const BODY_LIMIT = 256 * 1024;
const ADMIN_PASSWORD = 'fuzz-admin-password-0123';
const API_KEY = 'sk-fuzz-api-account-key-0123456789';
const PROVIDER_KEY = 'sk-fuzz-provider-key-0123456789';
const PLATFORMS = ['api', 'chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'];
const REPO_ROOT = path.resolve(import.meta.dirname, '..');

/**
 * 502 means a platform or provider outside the service failed (DESIGN §8). It is the right
 * answer of an outbound send that the platform does not confirm in time (no channel-connector
 * runs here, so nothing confirms) and of a chat or response whose agent's provider fails; no other route
 * may answer 5xx.
 */
const UPSTREAM_OPERATIONS = new Set([
  'POST /api/v1/chat/completions',
  'POST /api/v1/responses',
  'POST /api/v1/channels/{platform}/send',
  'POST /api/v1/channels/{platform}/send-image',
  'POST /api/v1/channels/{platform}/send-file',
]);

// ---------------------------------------------------------------------------------------------
// The document, as the fuzzer reads it.

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  nullable?: boolean;
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number | boolean;
  exclusiveMaximum?: number | boolean;
  minItems?: number;
  maxItems?: number;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
};

interface Param {
  name: string;
  in: 'path' | 'query';
  required: boolean;
  schema: Schema;
}

interface Operation {
  method: string;
  path: string;
  key: string;
  params: Param[];
  body?: { contentType: string; schema: Schema };
  /** Declared `security: []` (access `public`): the one kind of operation an anonymous caller may reach. */
  open: boolean;
}

interface OpenApiDocument {
  paths: Record<
    string,
    Record<string, { parameters?: Array<Param & { in: string }>; requestBody?: { content: Record<string, { schema: Schema }> }; security?: unknown[] }>
  >;
}

function operationsOf(doc: OpenApiDocument): Operation[] {
  const ops: Operation[] = [];
  for (const [p, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const params = (op.parameters ?? []).filter((x): x is Param => x.in === 'path' || x.in === 'query');
      const content = Object.entries(op.requestBody?.content ?? {})[0];
      ops.push({
        method: method.toUpperCase(),
        path: p,
        key: `${method.toUpperCase()} ${p}`,
        params,
        ...(content ? { body: { contentType: content[0], schema: content[1].schema } } : {}),
        open: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  }
  return ops;
}

// ---------------------------------------------------------------------------------------------
// Values: from the schema, with known ids mixed in so that requests reach past the 404s.

interface Pools {
  cronIds: string[];
  sessionIds: string[];
}

function poolFor(name: string, where: string, pools: Pools): string[] | undefined {
  switch (name) {
    case 'agentId':
    case 'target':
    case 'model':
      return ['fz_agent'];
    case 'platform':
    case 'channel':
      return PLATFORMS;
    case 'accountId':
      return ['fz_bot', 'fz_api'];
    case 'path':
    case 'imagePath':
    case 'filePath':
      return ['notes/a.md', 'notes', 'AGENTS.md'];
    case 'name':
      if (where.includes('/providers/')) return ['fz_spare', 'fake'];
      if (where.includes('skills')) return ['fz_skill'];
      return undefined;
    case 'id':
      if (where.includes('/cron')) return pools.cronIds;
      if (where.includes('/sessions')) return pools.sessionIds;
      if (where.includes('/rules')) return ['fz_rule', 'fz_arule'];
      return undefined;
    default:
      return undefined;
  }
}

const SHORT = 24;

function valueArb(schema: Schema | undefined, name: string | undefined, where: string, pools: Pools, depth = 0): fc.Arbitrary<unknown> {
  const base = schemaArb(schema ?? {}, where, pools, depth);
  const nullable = schema?.nullable ? fc.oneof(base, fc.constant(null)) : base;
  const pool = name ? poolFor(name, where, pools) : undefined;
  if (!pool || pool.length === 0) return nullable;
  return fc.oneof({ arbitrary: fc.constantFrom(...pool), weight: 3 }, { arbitrary: nullable, weight: 1 });
}

function schemaArb(s: Schema, where: string, pools: Pools, depth: number): fc.Arbitrary<unknown> {
  if (s.enum && s.enum.length > 0) return fc.constantFrom(...s.enum);
  if (s.const !== undefined) return fc.constant(s.const);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives && alternatives.length > 0) return fc.oneof(...alternatives.map((a) => valueArb(a, undefined, where, pools, depth)));
  if (s.allOf && s.allOf.length > 0) return valueArb(s.allOf[0], undefined, where, pools, depth);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string': {
      if (s.format === 'binary') return fc.string({ maxLength: SHORT });
      const maxLength = Math.min(s.maxLength ?? SHORT, SHORT);
      const minLength = Math.min(s.minLength ?? 0, maxLength);
      if (s.pattern) {
        return fc.stringMatching(new RegExp(s.pattern), { maxLength: Math.max(maxLength, 16) }).filter((v) => v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? Infinity));
      }
      return fc.oneof(
        { arbitrary: fc.string({ minLength, maxLength }), weight: 4 },
        { arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme' }), weight: 1 },
      );
    }
    case 'integer': {
      const min = typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : (s.minimum ?? -1000);
      const max = typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum - 1 : (s.maximum ?? Math.max(min + 1000, 1000));
      return fc.integer({ min, max });
    }
    case 'number':
      return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (depth > 4) return fc.constant([]);
      const minLength = Math.min(s.minItems ?? 0, 3);
      return fc.array(valueArb(s.items, undefined, where, pools, depth + 1), { minLength, maxLength: Math.max(minLength, Math.min(s.maxItems ?? 3, 3)) });
    }
    case 'object': {
      const props = s.properties ?? {};
      if (Object.keys(props).length === 0 || depth > 4) return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 });
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, v] of Object.entries(props)) model[k] = valueArb(v, k, where, pools, depth + 1);
      return fc.record(model, { requiredKeys: (s.required ?? []).filter((k) => k in props) });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

// ---------------------------------------------------------------------------------------------
// Mutations.

const UNICODE = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\udc00\ud800',
  '\u202eevil\u202c',
  '\u200f\u05e9\u05dc\u05d5\u05dd',
  '\ufeff',
  '\u200b\u200d',
  '😀👩‍👩‍👧‍👦',
  'e\u0301\u0301\u0301',
  'İıﬁ',
  '\u0085\u2028\u2029',
  '\r\n\t\u001b[31m',
  '${NAME}',
  '../../etc/passwd',
  '%00',
  "'; DROP TABLE agents; --",
  '{{7*7}}',
];
const BAD_PATH_VALUES = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F%2E%2E',
  '..%2F..%2Fetc%2Fpasswd',
  '%00',
  'a%00b',
  'a%2Fb',
  '%2F',
  '%5C..%5C',
  '%',
  '%zz',
  '%c0%ae%c0%ae',
  '%E2%80%AE',
  '%F0%9F%98%80',
  '%ED%A0%80',
  '%FF%FE',
  '~',
  '-',
  '_',
  'CON',
  'a'.repeat(65),
  'a'.repeat(5000),
  '%252e%252e',
  '%20',
  '+',
  'null',
  'undefined',
  '__proto__',
  'constructor',
];
const BAD_NUMBERS = ['-1', '0', '-0', 'NaN', 'Infinity', '1e309', '1.5', '99999999999999999999', '9007199254740993', '0x10', '1e3', '', ' 1', 'true', '[]', '{}', '1,2', '٣'];
const BAD_QUERY_VALUES = [...BAD_NUMBERS, '%', '%00', '%zz', 'a'.repeat(3000), '\u0000', '..', '../..', '%2e%2e%2f', 'all&scope=local'];
const CONTENT_TYPES = [
  'text/plain',
  'application/xml',
  'application/x-www-form-urlencoded',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json;;;',
  'APPLICATION/JSON',
  'text/json',
  'application/jsonx',
  'application/octet-stream',
  'multipart/form-data',
  'multipart/form-data; boundary=',
  'image/png',
  '*/*',
  'application/json, text/plain',
];
const MALFORMED_JSON = [
  '{',
  '{"a":',
  '[1,2',
  '{"a":1}}',
  'nul',
  "{'a':1}",
  '{"a":NaN}',
  '{"a":Infinity}',
  '\ufeff{}',
  '{"a":1,"a":2}',
  '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '""',
  '123',
  'null',
  '[]',
  'true',
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '{"a":"\\x00"}',
  '{"a":1e999}',
  '{"a":-}',
  '/* */{}',
  '{}\u0000',
  ' ',
];
const EXTRA_KEYS = ['__proto__', 'constructor', 'prototype', 'isAdmin', 'role', 'ownerId', 'tenantId', 'id', 'createdAt', '$where', '', ' ', 'a.b', 'x'.repeat(300)];
const MULTIPART_VARIANTS = ['validZip', 'noBoundary', 'truncated', 'wrongPartName', 'zeroByte', 'notZip', 'hugePart', 'twoFiles', 'fieldsOnly', 'zipSlip', 'garbageAfterEnd', 'emptyBody'] as const;

type Mutation =
  | { kind: 'valid' }
  | { kind: 'wrongType'; pick: number; value: unknown }
  | { kind: 'dropRequired'; pick: number }
  | { kind: 'extraFields'; pick: number; fields: Array<[string, unknown]> }
  | { kind: 'hugeString'; pick: number; size: number; char: string }
  | { kind: 'deepJson'; pick: number; depth: number; shape: 'array' | 'object' }
  | { kind: 'unicode'; pick: number; text: string }
  | { kind: 'invalidUtf8'; pick: number }
  | { kind: 'badPath'; pick: number; value: string }
  | { kind: 'badQuery'; pick: number; value: string; asArray: boolean; extra: boolean }
  | { kind: 'contentType'; contentType: string }
  | { kind: 'malformedJson'; text: string }
  | { kind: 'multipart'; variant: (typeof MULTIPART_VARIANTS)[number]; pick: number }
  | { kind: 'method'; method: string }
  | { kind: 'pathSpelling'; how: (typeof PATH_SPELLINGS)[number] };

/** Ways to spell the same path that a router may fold into it: none may get past the guard. */
const PATH_SPELLINGS = ['percentLetters', 'encodedSlash', 'doubleEncoded', 'doubledSlashes', 'dotSegment', 'dotDot', 'trailingSlash', 'semicolon', 'upperCase'] as const;

function respell(url: string, how: (typeof PATH_SPELLINGS)[number]): string {
  const q = url.indexOf('?');
  const pathPart = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  const segs = pathPart.split('/').slice(1);
  const first = (enc: (c: string) => string) => `/${segs.map((s) => (s ? enc(s[0]!) + s.slice(1) : s)).join('/')}`;
  switch (how) {
    case 'percentLetters':
      return first((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`) + query;
    case 'encodedSlash':
      return `/${segs[0]}%2F${segs.slice(1).join('/')}${query}`;
    case 'doubleEncoded':
      return first((c) => `%25${c.charCodeAt(0).toString(16).padStart(2, '0')}`) + query;
    case 'doubledSlashes':
      return `/${segs.join('//')}${query}`;
    case 'dotSegment':
      return `/${segs[0]}/./${segs.slice(1).join('/')}${query}`;
    case 'dotDot':
      return `/${segs[0]}/zz/../${segs.slice(1).join('/')}${query}`;
    case 'trailingSlash':
      return `${pathPart}/${query}`;
    case 'semicolon':
      return `/${segs[0]};a=1/${segs.slice(1).join('/')}${query}`;
    case 'upperCase':
      return pathPart.toUpperCase() + query;
    default: {
      const never: never = how;
      throw new Error(`unknown spelling ${String(never)}`);
    }
  }
}

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'valid' as const }), weight: 6 },
  {
    arbitrary: fc.record({
      kind: fc.constant('wrongType' as const),
      pick: fc.nat(),
      value: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.object({ maxDepth: 1 }), fc.string(), fc.double()),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('dropRequired' as const), pick: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('extraFields' as const),
      pick: fc.nat(),
      fields: fc.array(fc.tuple(fc.oneof(fc.constantFrom(...EXTRA_KEYS), fc.string({ maxLength: 10 })), fc.jsonValue({ maxDepth: 2 })), { minLength: 1, maxLength: 4 }),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('hugeString' as const),
      pick: fc.nat(),
      size: fc.constantFrom(5_000, 70_000, BODY_LIMIT - 600, BODY_LIMIT + 1, 3 * BODY_LIMIT),
      char: fc.constantFrom('x', 'é', '😀', '\u0000', '"', '\\'),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('deepJson' as const), pick: fc.nat(), depth: fc.constantFrom(64, 1000, 10_000), shape: fc.constantFrom('array' as const, 'object' as const) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('unicode' as const),
      pick: fc.nat(),
      text: fc.oneof(fc.constantFrom(...UNICODE), fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 })),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('invalidUtf8' as const), pick: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('badPath' as const), pick: fc.nat(), value: fc.constantFrom(...BAD_PATH_VALUES) }), weight: 3 },
  {
    arbitrary: fc.record({ kind: fc.constant('badQuery' as const), pick: fc.nat(), value: fc.constantFrom(...BAD_QUERY_VALUES), asArray: fc.boolean(), extra: fc.boolean() }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('contentType' as const), contentType: fc.constantFrom(...CONTENT_TYPES) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('malformedJson' as const), text: fc.constantFrom(...MALFORMED_JSON) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('multipart' as const), variant: fc.constantFrom(...MULTIPART_VARIANTS), pick: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('method' as const), method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('pathSpelling' as const), how: fc.constantFrom(...PATH_SPELLINGS) }), weight: 2 },
);

/** Paths to every node of a JSON value (the root is `[]`). */
function nodePaths(value: unknown, at: Array<string | number> = [], out: Array<Array<string | number>> = []): Array<Array<string | number>> {
  out.push(at);
  if (Array.isArray(value)) value.forEach((v, i) => nodePaths(v, [...at, i], out));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) nodePaths(v, [...at, k], out);
  return out;
}

function getAt(value: unknown, at: Array<string | number>): unknown {
  return at.reduce<unknown>((node, k) => (node as Record<string | number, unknown>)?.[k], value);
}

/** A copy of `value` with the node at `at` replaced (the root when `at` is empty). */
function setAt(value: unknown, at: Array<string | number>, next: unknown): unknown {
  if (at.length === 0) return next;
  const [head, ...rest] = at;
  const copy = (Array.isArray(value) ? [...(value as unknown[])] : { ...(value as object) }) as Record<string | number, unknown>;
  copy[head!] = setAt(copy[head!], rest, next);
  return copy;
}

function deepText(depth: number, shape: 'array' | 'object'): string {
  return shape === 'array' ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

// ---------------------------------------------------------------------------------------------
// Zip and multipart bytes, written by hand (stored entries; rawZip from libs/testing).

const SKILL_ZIP = rawZip([{ name: 'fz_uploaded/SKILL.md', data: Buffer.from('---\nname: fz_uploaded\ndescription: uploaded by the fuzzer\n---\nDo fuzzy things.\n') }]);

function multipartBody(variant: (typeof MULTIPART_VARIANTS)[number], pick: number): { payload: Buffer; contentType: string } {
  const boundary = `----fuzz${pick.toString(16)}`;
  const part = (name: string, value: Buffer | string, filename?: string) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n${filename ? 'Content-Type: application/zip\r\n' : ''}\r\n`),
      Buffer.isBuffer(value) ? value : Buffer.from(value),
      Buffer.from('\r\n'),
    ]);
  const end = Buffer.from(`--${boundary}--\r\n`);
  const ct = `multipart/form-data; boundary=${boundary}`;
  const scope = pick % 3 === 0 ? [part('scope', pick % 2 === 0 ? 'local' : 'sideways'), part('agentId', 'fz_agent')] : [];
  switch (variant) {
    case 'validZip':
      return { payload: Buffer.concat([...scope, part('file', SKILL_ZIP, 'skills.zip'), end]), contentType: ct };
    case 'noBoundary':
      return { payload: Buffer.concat([part('file', SKILL_ZIP, 'skills.zip'), end]), contentType: 'multipart/form-data' };
    case 'truncated': {
      const whole = Buffer.concat([part('file', SKILL_ZIP, 'skills.zip'), end]);
      return { payload: whole.subarray(0, 1 + (pick % (whole.length - 1))), contentType: ct };
    }
    case 'wrongPartName':
      return { payload: Buffer.concat([part('archive', SKILL_ZIP, 'skills.zip'), end]), contentType: ct };
    case 'zeroByte':
      return { payload: Buffer.concat([part('file', Buffer.alloc(0), 'empty.zip'), end]), contentType: ct };
    case 'notZip':
      return { payload: Buffer.concat([part('file', 'this is not a zip archive', 'skills.zip'), end]), contentType: ct };
    case 'hugePart':
      return { payload: Buffer.concat([part('file', Buffer.alloc(BODY_LIMIT * 2, 0x50), 'huge.zip'), end]), contentType: ct };
    case 'twoFiles':
      return { payload: Buffer.concat([part('file', SKILL_ZIP, 'a.zip'), part('file', SKILL_ZIP, 'b.zip'), end]), contentType: ct };
    case 'fieldsOnly':
      return { payload: Buffer.concat([part('file', 'not a file part'), part('scope', 'global'), end]), contentType: ct };
    case 'zipSlip':
      return { payload: Buffer.concat([part('file', rawZip([{ name: '../../evil/SKILL.md', data: Buffer.from('# evil') }]), 'slip.zip'), end]), contentType: ct };
    case 'garbageAfterEnd':
      return { payload: Buffer.concat([part('file', SKILL_ZIP, 'skills.zip'), end, Buffer.from('\u0000garbage'.repeat(10))]), contentType: ct };
    case 'emptyBody':
      return { payload: Buffer.alloc(0), contentType: ct };
    default: {
      const never: never = variant;
      throw new Error(`unknown multipart variant ${String(never)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Cases: an operation, valid-ish parts, one mutation, credentials.

type AuthChoice = 'token' | 'none' | 'garbage' | 'apiKey' | 'malformed';

interface FuzzCase {
  op: Operation;
  pathValues: Record<string, unknown>;
  query: Record<string, unknown>;
  body: unknown;
  mutation: Mutation;
  auth: AuthChoice;
}

interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
}

/**
 * Bodies that pass validation, for the operations whose schema alone rarely yields one (a DSL
 * that validates, a cron schedule, a chat): mutations of them reach the code behind validation.
 */
function exampleBody(op: Operation): fc.Arbitrary<unknown> | undefined {
  const id = fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/);
  const text = fc.oneof(fc.string({ minLength: 1, maxLength: 20 }), fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme' }));
  const withoutId = <T extends { ruleChain: { id?: string } }>(dsl: T) => ({ ...dsl, ruleChain: { ...dsl.ruleChain, id: undefined } });
  switch (op.key) {
    case 'POST /api/v1/agents':
      return id.map((i) => AGENT(`fz_${i}`));
    case 'PUT /api/v1/agents/{agentId}':
      return text.map((name) => withoutId({ ...AGENT('fz_agent'), ruleChain: { id: 'fz_agent', name } }));
    case 'POST /api/v1/rules':
    case 'POST /api/v1/agents/{agentId}/rules':
      return id.map((i) => RULE(`fz_${i}`));
    case 'PUT /api/v1/rules/{id}':
    case 'PUT /api/v1/agents/{agentId}/rules/{id}':
      return fc.constant(withoutId(RULE('x')));
    case 'POST /api/v1/chat/completions':
      return fc.record({
        model: fc.constant('fz_agent'),
        messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: text }), { minLength: 1, maxLength: 3 }),
        stream: fc.boolean(),
        sessionId: fc.option(text, { nil: undefined }),
      });
    case 'POST /api/v1/cron':
    case 'POST /api/v1/agents/{agentId}/cron':
      return fc.record({ name: text, schedule: fc.constantFrom('0 * * * * *', '*/5 * * * * *', '0 0 3 * * 1-5'), message: text, target: fc.constant('fz_agent') });
    case 'POST /api/v1/skills':
    case 'POST /api/v1/agents/{agentId}/skills':
      return fc.record({ name: id, description: text, content: text });
    case 'POST /api/v1/agents/{agentId}/workspace/files':
      return fc.record({ path: fc.constantFrom('a.txt', 'dir/b.md', 'notes/c.md'), content: text });
    case 'PUT /api/v1/bindings':
      return fc.constant({ bindings: [{ agentId: 'fz_agent', match: { channel: 'chat_d', accountId: 'fz_bot' } }] });
    case 'POST /api/v1/channels/{platform}/accounts':
      return fc.record({ id, name: text, app_id: text, app_secret: fc.constant('123456:fuzz-secret'), dm_policy: fc.constantFrom('allow', 'disabled') });
    case 'POST /api/v1/config/models/providers':
      return fc.record({ id, base_url: fc.constant('http://127.0.0.1:9/v1'), model: text });
    case 'POST /api/v1/sessions/clear':
      return fc.record({ agentId: fc.constant('fz_agent'), sessionKey: text });
    default:
      return undefined;
  }
}

function caseArb(ops: Operation[], pools: Pools): fc.Arbitrary<FuzzCase> {
  return fc.constantFrom(...ops).chain((op) => {
    const pathModel: Record<string, fc.Arbitrary<unknown>> = {};
    const queryModel: Record<string, fc.Arbitrary<unknown>> = {};
    const requiredQuery: string[] = [];
    for (const p of op.params) {
      const arb = valueArb(p.schema, p.name, op.path, pools);
      if (p.in === 'path') pathModel[p.name] = arb;
      else {
        queryModel[p.name] = arb;
        if (p.required) requiredQuery.push(p.name);
      }
    }
    return fc.record({
      op: fc.constant(op),
      pathValues: fc.record(pathModel),
      query: fc.record(queryModel, { requiredKeys: requiredQuery }),
      body: op.body ? bodyArb(op, pools) : fc.constant(undefined),
      mutation: mutationArb,
      auth: fc.constantFrom<AuthChoice>('token', 'token', 'token', 'token', 'token', 'token', 'none', 'garbage', 'apiKey', 'malformed'),
    });
  });
}

function bodyArb(op: Operation, pools: Pools): fc.Arbitrary<unknown> {
  const fromSchema = valueArb(op.body!.schema, undefined, op.path, pools);
  const example = exampleBody(op);
  return example ? fc.oneof(example, fromSchema) : fromSchema;
}

/** encodeURIComponent that does not throw on a lone surrogate: it goes out as its WTF-8 bytes. */
function encode(text: string): string {
  return Array.from(text, (cp) => {
    const c = cp.charCodeAt(0);
    if (cp.length === 1 && c >= 0xd800 && c <= 0xdfff) {
      return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    }
    return encodeURIComponent(cp);
  }).join('');
}

function stringify(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value) ?? '';
}

/** The request a case stands for; `tokens` are the credentials of the target. */
function requestOf(c: FuzzCase, tokens: { jwt: string; apiKey: string }, n: number): FuzzRequest {
  const m = c.mutation;
  const headers: Record<string, string> = { 'x-request-id': `fz-${n}` };
  let body = c.body;
  let raw: string | Buffer | undefined;
  const pathValues: Record<string, string> = Object.fromEntries(Object.entries(c.pathValues).map(([k, v]) => [k, encode(stringify(v))]));
  const query: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(c.query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) query.push([k, stringify(item)]);
    else query.push([k, stringify(v)]);
  }
  let rawQuery = '';

  const bodyNodes = body === undefined ? [] : nodePaths(body);
  const stringNodes = bodyNodes.filter((at) => typeof getAt(body, at) === 'string');
  const objectNodes = bodyNodes.filter((at) => {
    const v = getAt(body, at);
    return v !== null && typeof v === 'object' && !Array.isArray(v);
  });
  const pathNames = Object.keys(pathValues);
  const queryNames = [...new Set([...c.op.params.filter((p) => p.in === 'query').map((p) => p.name), ...query.map(([k]) => k)])];

  switch (m.kind) {
    case 'valid':
      break;
    case 'wrongType':
      if (bodyNodes.length > 0) body = setAt(body, bodyNodes[m.pick % bodyNodes.length]!, m.value);
      else if (queryNames.length > 0) query.push([queryNames[m.pick % queryNames.length]!, stringify(m.value)]);
      else body = m.value;
      break;
    case 'dropRequired': {
      const holders = objectNodes.filter((at) => Object.keys(getAt(body, at) as object).length > 0);
      if (holders.length > 0) {
        const at = holders[m.pick % holders.length]!;
        const obj = { ...(getAt(body, at) as Record<string, unknown>) };
        const keys = Object.keys(obj);
        delete obj[keys[m.pick % keys.length]!];
        body = setAt(body, at, obj);
      } else if (pathNames.length > 0) pathValues[pathNames[m.pick % pathNames.length]!] = '';
      else if (body !== undefined) body = undefined;
      break;
    }
    case 'extraFields': {
      const at = objectNodes.length > 0 ? objectNodes[m.pick % objectNodes.length]! : [];
      const target = objectNodes.length > 0 ? { ...(getAt(body, at) as Record<string, unknown>) } : {};
      // defineProperty: a plain assignment of "__proto__" would set the prototype, not a key.
      for (const [k, v] of m.fields) Object.defineProperty(target, k, { value: v, enumerable: true, configurable: true, writable: true });
      if (objectNodes.length > 0) body = setAt(body, at, target);
      else if (body === undefined) {
        for (const [k, v] of m.fields) query.push([k, stringify(v)]);
      } else body = target;
      break;
    }
    case 'hugeString': {
      const huge = m.char.repeat(Math.ceil(m.size / Buffer.byteLength(m.char)));
      if (stringNodes.length > 0) body = setAt(body, stringNodes[m.pick % stringNodes.length]!, huge);
      else if (body !== undefined) body = setAt(body, bodyNodes[m.pick % bodyNodes.length]!, huge);
      else if (queryNames.length > 0) query.push([queryNames[m.pick % queryNames.length]!, huge.slice(0, 20_000)]);
      else if (pathNames.length > 0) pathValues[pathNames[m.pick % pathNames.length]!] = encode(huge.slice(0, 20_000));
      break;
    }
    case 'deepJson': {
      const marker = '\u0001FZDEEP\u0001';
      const at = bodyNodes.length > 0 ? bodyNodes[m.pick % bodyNodes.length]! : [];
      raw = stringify(setAt(body ?? {}, at, marker)).replace(JSON.stringify(marker), deepText(m.depth, m.shape));
      break;
    }
    case 'unicode':
      if (stringNodes.length > 0 && m.pick % 3 !== 0) body = setAt(body, stringNodes[m.pick % stringNodes.length]!, m.text);
      else if (pathNames.length > 0 && m.pick % 2 === 0) pathValues[pathNames[m.pick % pathNames.length]!] = encode(m.text);
      else if (queryNames.length > 0) query.push([queryNames[m.pick % queryNames.length]!, m.text]);
      else if (body !== undefined && bodyNodes.length > 0) body = setAt(body, bodyNodes[m.pick % bodyNodes.length]!, m.text);
      else pathValues[pathNames[0] ?? '_'] = encode(m.text);
      break;
    case 'invalidUtf8': {
      const marker = '\u0001FZBYTES\u0001';
      const at = stringNodes.length > 0 ? stringNodes[m.pick % stringNodes.length]! : bodyNodes.length > 0 ? bodyNodes[m.pick % bodyNodes.length]! : [];
      const text = stringify(setAt(body ?? {}, at, marker));
      const [before, after] = text.split(JSON.stringify(marker));
      raw = Buffer.concat([Buffer.from(before ?? ''), Buffer.from([0x22, 0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0x22]), Buffer.from(after ?? '')]);
      break;
    }
    case 'badPath':
      if (pathNames.length > 0) pathValues[pathNames[m.pick % pathNames.length]!] = m.value;
      else query.push(['path', m.value]);
      break;
    case 'badQuery': {
      const name = queryNames.length > 0 ? queryNames[m.pick % queryNames.length]! : ['page', 'size', 'path', 'scope'][m.pick % 4]!;
      rawQuery = `${name}=${m.value}`;
      if (m.asArray) rawQuery += `&${name}=${m.value}&${name}[]=1`;
      if (m.extra) rawQuery += `&__proto__[polluted]=1&constructor.prototype.x=1&a[b][c]=d`;
      break;
    }
    case 'contentType':
      headers['content-type'] = m.contentType;
      raw = stringify(body ?? { a: 1 });
      break;
    case 'malformedJson':
      headers['content-type'] = 'application/json';
      raw = m.text;
      break;
    case 'multipart': {
      const mp = multipartBody(m.variant, m.pick);
      headers['content-type'] = mp.contentType;
      raw = mp.payload;
      break;
    }
    case 'method':
    case 'pathSpelling':
      break;
    default: {
      const never: never = m;
      throw new Error(`unknown mutation ${JSON.stringify(never)}`);
    }
  }

  let url = c.op.path.replace(/\{([^}]+)\}/g, (_, name: string) => pathValues[name] ?? 'x');
  const qs = query.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&');
  const search = [qs, rawQuery].filter(Boolean).join('&');
  if (search) url += `?${search}`;
  if (m.kind === 'pathSpelling') url = respell(url, m.how);

  const method = m.kind === 'method' ? m.method : c.op.method;
  if (raw === undefined && body !== undefined && c.op.body) {
    if (c.op.body.contentType === 'multipart/form-data') {
      const mp = multipartBody('validZip', n);
      headers['content-type'] = mp.contentType;
      raw = mp.payload;
    } else {
      headers['content-type'] ??= 'application/json';
      raw = JSON.stringify(body);
    }
  }
  if (raw !== undefined && m.kind !== 'contentType' && m.kind !== 'multipart' && m.kind !== 'malformedJson') headers['content-type'] ??= 'application/json';

  switch (c.auth) {
    case 'token':
      headers.authorization = `Bearer ${tokens.jwt}`;
      break;
    case 'apiKey':
      headers.authorization = `Bearer ${tokens.apiKey}`;
      break;
    case 'garbage':
      headers.authorization = `Bearer ${tokens.jwt.slice(0, -4)}AAAA`;
      break;
    case 'malformed':
      headers.authorization = 'Basic YWRtaW46YWRtaW4=';
      break;
    case 'none':
      break;
  }
  return { method, url, headers, ...(raw !== undefined && method !== 'GET' && method !== 'HEAD' ? { payload: raw } : {}) };
}

// ---------------------------------------------------------------------------------------------
// The properties of one answer.

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

const STACK = [/\n\s+at /, /\bat [^\s()]+ \((?:file:\/\/)?\/[^)]*:\d+:\d+\)/, /node:internal/, /node_modules\//, /\.(?:ts|js|mjs):\d+/];

/** The operations of the OpenAI-compatible routes, by their OpenAPI path. */
const OPENAI_OPERATION = /\/(?:chat\/completions|responses|models)(?:\/\{[^}]+\}(?:\/(?:cancel|input_items))?)?$/;

/** Why this answer breaks a property, or undefined when it keeps them all. */
function violation(op: Operation, req: FuzzRequest, res: Answer): string | undefined {
  if (res.status >= 500 && !(res.status === 502 && UPSTREAM_OPERATIONS.has(op.key))) return `status ${res.status}`;
  if (res.status < 400 || req.method === 'HEAD') return undefined;
  const type = String(res.headers['content-type'] ?? '');
  if (!type.startsWith('application/json')) return `error answer with content-type "${type}"`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    return 'error answer is not JSON';
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return 'error answer is not an object';
  const keys = Object.keys(parsed);
  if (keys.length !== 1 || keys[0] !== 'error') return `error answer has keys ${JSON.stringify(keys)}`;
  let error = (parsed as { error: unknown }).error;
  // The OpenAI-compatible operations answer OpenAI's error object (a mutated path that reaches no
  // route is answered by the management API's 404, so either shape may come back for them).
  if (OPENAI_OPERATION.test(op.path) && error && typeof error === 'object' && !Array.isArray(error)) {
    const fields = Object.keys(error).sort();
    if (JSON.stringify(fields) !== JSON.stringify(['code', 'message', 'param', 'type'])) return `OpenAI error object has keys ${JSON.stringify(fields)}`;
    error = (error as { message: unknown }).message;
  }
  if (typeof error !== 'string' || error.length === 0) return 'error is not a non-empty string';
  if (STACK.some((re) => re.test(error)) || error.includes(REPO_ROOT)) return 'error message carries a stack trace or a file path';
  return undefined;
}

/**
 * With authentication required, a caller without a valid credential reaches no guarded
 * operation, however the path is spelled. (A changed method may name another operation on the
 * same path, so those cases are left to the other properties.)
 */
function accessLeak(c: FuzzCase, res: Answer, requireAuth: boolean): string | undefined {
  if (!requireAuth || c.op.open || c.mutation.kind === 'method') return undefined;
  if (c.auth !== 'none' && c.auth !== 'garbage' && c.auth !== 'malformed') return undefined;
  // The web UI's page answers any path outside the API (`/API/V1/...`, `/api%2Fv1/...`): public, and no data.
  if (String(res.headers['content-type'] ?? '').startsWith('text/html')) return undefined;
  return res.status < 400 ? `answered ${res.status} to a caller without valid credentials` : undefined;
}

function describeRequest(req: FuzzRequest): string {
  const payload = req.payload === undefined ? '' : Buffer.isBuffer(req.payload) ? `<${req.payload.length} bytes>` : req.payload;
  const short = (s: string) => (s.length > 300 ? `${s.slice(0, 300)}... (${s.length} chars)` : s);
  return `${req.method} ${short(req.url)} ${JSON.stringify({ ...req.headers, authorization: req.headers.authorization ? '<set>' : undefined })} ${short(payload)}`;
}

// ---------------------------------------------------------------------------------------------
// Targets.

interface Target {
  name: string;
  send(req: FuzzRequest): Promise<Answer | 'unsendable'>;
  /** Log lines of a request id, to explain a violation. */
  logsOf(id: string): string;
}

function injectTarget(name: string, app: FastifyInstance, logs: string[]): Target {
  return {
    name,
    send: async (req) => {
      let res;
      try {
        res = await app.inject({ method: req.method as 'GET', url: req.url, headers: req.headers, ...(req.payload !== undefined ? { payload: req.payload } : {}) });
      } catch (err) {
        // light-my-request refuses what no HTTP client could send (an invalid header value, say).
        if ((err as { code?: string }).code?.startsWith('ERR_')) return 'unsendable';
        throw err;
      }
      return { status: res.statusCode, headers: res.headers, body: res.body };
    },
    logsOf: (id) => {
      const mine = logs.filter((l) => l.includes(`"reqId":"${id}"`));
      // The worker's lines of the request's run, if it started one.
      const runs = new Set(mine.flatMap((l) => [...l.matchAll(/"runId":"([0-9a-f]+)"/g)].map((m) => m[1]!)));
      const worker = logs.filter((l) => !l.includes(`"reqId":"${id}"`) && [...runs].some((r) => l.includes(r)));
      return [...mine, ...worker].join('').slice(0, 6000);
    },
  };
}

function httpTarget(name: string, base: URL, output: () => string): Target {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  return {
    name,
    send: (req) =>
      new Promise((resolve, reject) => {
        let r: http.ClientRequest;
        try {
          // Framed by length: Node's client sends a DELETE body without framing, which the server
          // would read as the start of the next request on the connection.
          const headers = req.payload === undefined ? req.headers : { ...req.headers, 'content-length': String(Buffer.byteLength(req.payload)) };
          r = http.request({ host: base.hostname, port: base.port, method: req.method, path: req.url, headers, agent, timeout: 30_000 }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
            res.on('error', reject);
          });
        } catch (err) {
          // Node's client refuses what it cannot put on the wire (unescaped characters in the path).
          if ((err as { code?: string }).code?.startsWith('ERR_')) return resolve('unsendable');
          return reject(err as Error);
        }
        r.on('timeout', () => r.destroy(new Error('no answer within 30 s')));
        r.on('error', (err: NodeJS.ErrnoException) => {
          // Past the body limit the server answers 413 and closes at once; a client still
          // writing may only see the closed connection (the in-process runs check that 413).
          const oversized = req.payload !== undefined && Buffer.byteLength(req.payload) > BODY_LIMIT;
          if (oversized && (err.code === 'EPIPE' || err.code === 'ECONNRESET')) resolve('unsendable');
          else reject(err);
        });
        r.end(req.payload);
      }),
    logsOf: (id) =>
      output()
        .split('\n')
        .filter((l) => l.includes(`"reqId":"${id}"`))
        .join('\n')
        .slice(0, 4000),
  };
}

/** Writes raw bytes on a fresh connection and reads until the server closes it. */
function rawExchange(base: URL, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(base.port), base.hostname, () => socket.end(raw));
    let text = '';
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.on('close', () => resolve(text));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' && text ? resolve(text) : reject(err)));
  });
}

/** Plain calls for fixtures and checks (valid requests, admin credentials). */
async function call(target: Target, jwt: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: () => unknown; body: string }> {
  const res = await target.send({
    method,
    url,
    headers: { authorization: `Bearer ${jwt}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  if (res === 'unsendable') throw new Error(`${method} ${url}: unsendable`);
  return { status: res.status, body: res.body, json: () => JSON.parse(res.body) as unknown };
}

const AGENT = (id: string) => ({
  ruleChain: { id, name: `Fuzz ${id}` },
  metadata: {
    nodes: [
      { id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: 'Echo.' } },
      { id: 'end', type: 'end' },
    ],
    connections: [{ fromId: 'agent', toId: 'end', type: 'Success' }],
  },
});
const RULE = (id: string) => ({
  ruleChain: { id, name: `Rule ${id}` },
  metadata: { nodes: [{ id: 'log', type: 'log' }], connections: [] },
});

/**
 * Puts back what the fuzzer may have removed or changed (known ids, the auth setting), so that
 * later cases keep reaching past the 404s. Every call must succeed: a service that cannot do
 * this any more was corrupted by an earlier case.
 */
interface Setup {
  requireAuth: boolean;
  /** The fake model the `fake` provider points at. */
  fakeUrl: string;
}

async function ensureFixtures(target: Target, jwt: string, setup: Setup, pools: Pools): Promise<void> {
  const ok = (what: string, res: { status: number; body: string }, allowed: number[]) => {
    if (!allowed.includes(res.status)) throw new Error(`${target.name}: fixture ${what}: ${res.status} ${res.body.slice(0, 500)}`);
  };
  // The fuzzer may change or remove providers (their key, their URL): put them back as they were.
  for (const id of ['fake', 'fz_spare']) {
    const provider = { name: id, base_url: setup.fakeUrl, api_key: PROVIDER_KEY, model: 'fake-model', models: [] };
    const restored = await call(target, jwt, 'PUT', `/api/v1/config/models/providers/${id}`, provider);
    if (restored.status === 404) ok(`provider ${id}`, await call(target, jwt, 'POST', '/api/v1/config/models/providers', { id, ...provider }), [201]);
    else ok(`provider ${id}`, restored, [200]);
  }
  ok('config', await call(target, jwt, 'PUT', '/api/v1/config', { security: { requireAuth: setup.requireAuth }, models: { default_provider: 'fz_spare' } }), [200]);
  const agent = await call(target, jwt, 'PUT', '/api/v1/agents/fz_agent', AGENT('fz_agent'));
  if (agent.status === 404) ok('agent', await call(target, jwt, 'POST', '/api/v1/agents', AGENT('fz_agent')), [201]);
  else ok('agent', agent, [200]);
  if ((await call(target, jwt, 'GET', '/api/v1/rules/fz_rule')).status === 404) ok('rule', await call(target, jwt, 'POST', '/api/v1/rules', RULE('fz_rule')), [201]);
  if ((await call(target, jwt, 'GET', '/api/v1/agents/fz_agent/rules/fz_arule')).status === 404) {
    ok('agent rule', await call(target, jwt, 'POST', '/api/v1/agents/fz_agent/rules', RULE('fz_arule')), [201, 409]);
  }
  if ((await call(target, jwt, 'GET', '/api/v1/skills/fz_skill')).status === 404) {
    ok('skill', await call(target, jwt, 'POST', '/api/v1/skills', { name: 'fz_skill', description: 'fuzz', content: 'Be fuzzy.' }), [201]);
  }
  if ((await call(target, jwt, 'GET', '/api/v1/agents/fz_agent/skills/fz_skill')).status === 404) {
    ok('local skill', await call(target, jwt, 'POST', '/api/v1/agents/fz_agent/skills', { name: 'fz_skill', content: 'Be local.' }), [201]);
  }
  const file = await call(target, jwt, 'PUT', '/api/v1/agents/fz_agent/workspace/file?path=notes/a.md', { content: '# notes' });
  // The fuzzer may have made "notes" a file: then the path is taken (409), which is no corruption.
  if (file.status === 404) ok('file', await call(target, jwt, 'POST', '/api/v1/agents/fz_agent/workspace/files', { path: 'notes/a.md', content: '# notes' }), [201, 409]);
  else ok('file', file, [200, 400, 409]);
  const crons = (await call(target, jwt, 'GET', '/api/v1/agents/fz_agent/cron')).json() as Array<{ id: string }>;
  if (crons.length === 0) {
    const made = await call(target, jwt, 'POST', '/api/v1/agents/fz_agent/cron', { name: 'fuzz', schedule: '0 0 3 * * *', message: 'tick' });
    ok('cron', made, [201]);
    crons.push(made.json() as { id: string });
  }
  pools.cronIds.splice(0, pools.cronIds.length, ...crons.map((c) => c.id));
  if ((await call(target, jwt, 'GET', '/api/v1/channels/chat_d/accounts/fz_bot')).status === 404) {
    ok(
      'account',
      await call(target, jwt, 'POST', '/api/v1/channels/chat_d/accounts', { id: 'fz_bot', name: 'Fuzz bot', app_secret: '123456:fuzz-bot-token', api_base: 'http://127.0.0.1:9' }),
      [201],
    );
  }
  if ((await call(target, jwt, 'GET', '/api/v1/channels/api/accounts/fz_api')).status === 404) {
    ok('api account', await call(target, jwt, 'POST', '/api/v1/channels/api/accounts', { id: 'fz_api', name: 'Fuzz api', api_key: API_KEY }), [201, 409]);
  }
  const sessions = await call(target, jwt, 'GET', '/api/v1/sessions?size=5');
  ok('sessions', sessions, [200]);
  const ids = (sessions.json() as { data: Array<{ id: string }> }).data.map((s) => s.id);
  pools.sessionIds.splice(0, pools.sessionIds.length, ...(ids.length > 0 ? ids : ['no-session-yet']));
}

/** After the run: every list still answers, and an agent can be created, chatted with and removed. */
async function checkUsable(target: Target, jwt: string, ops: Operation[]): Promise<void> {
  for (const op of ops.filter((o) => o.method === 'GET' && o.params.every((p) => p.in === 'query' && !p.required))) {
    const res = await call(target, jwt, 'GET', op.path);
    expect(res.status, `${target.name}: ${op.key} after the run: ${res.body.slice(0, 300)}`).toBe(200);
  }
  const id = `fz_after_${Date.now().toString(36)}`;
  expect((await call(target, jwt, 'POST', '/api/v1/agents', AGENT(id))).status).toBe(201);
  expect((await call(target, jwt, 'GET', `/api/v1/agents/${id}`)).json()).toEqual(AGENT(id));
  const chat = await call(target, jwt, 'POST', '/api/v1/chat/completions', { model: id, messages: [{ role: 'user', content: 'still there?' }] });
  expect(chat.status, chat.body).toBe(200);
  expect(JSON.stringify(chat.json())).toContain('still there?');
  expect((await call(target, jwt, 'DELETE', `/api/v1/agents/${id}`)).json()).toEqual({ success: true });
}

interface RunStats {
  cases: number;
  unsendable: number;
  statuses: Record<string, number>;
  operations: Set<string>;
  /** The 502s allowed (UPSTREAM_OPERATIONS), by operation. */
  upstream: Record<string, number>;
}

/**
 * Runs `numRuns` generated cases against the target, one at a time, and fails at the end with
 * every distinct violation (operation, mutation kind and reason), each with its first request,
 * answer and log lines, so that one run shows all there is to fix. No shrinking: cases depend on
 * server state, and shrinking megabyte bodies would take minutes. The seed replays the run.
 */
async function fuzz(target: Target, ops: Operation[], opts: { numRuns: number; jwt: string; setup: Setup; seed: number }): Promise<RunStats> {
  const pools: Pools = { cronIds: [], sessionIds: [] };
  await ensureFixtures(target, opts.jwt, opts.setup, pools);
  const stats: RunStats = { cases: 0, unsendable: 0, statuses: {}, operations: new Set(), upstream: {} };
  const violations = new Map<string, string>();
  const cases = caseArb(ops, pools);
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
      const n = stats.cases;
      stats.cases += 1;
      if (n > 0 && n % 150 === 0) await ensureFixtures(target, opts.jwt, opts.setup, pools);
      const req = requestOf(c, { jwt: opts.jwt, apiKey: API_KEY }, n);
      const res = await target.send(req);
      // A fuzzed PUT /config may switch authentication off; the access property needs it as set up.
      if (req.method === 'PUT' && c.op.path === '/api/v1/config') await call(target, opts.jwt, 'PUT', '/api/v1/config', { security: { requireAuth: opts.setup.requireAuth } });
      if (res === 'unsendable') {
        stats.unsendable += 1;
        return;
      }
      stats.operations.add(c.op.key);
      const bucket = `${Math.floor(res.status / 100)}xx`;
      stats.statuses[bucket] = (stats.statuses[bucket] ?? 0) + 1;
      if (res.status === 502) stats.upstream[c.op.key] = (stats.upstream[c.op.key] ?? 0) + 1;
      const why = violation(c.op, req, res) ?? accessLeak(c, res, opts.setup.requireAuth);
      const key = `${c.op.key} / ${c.mutation.kind} / ${why}`;
      if (why && !violations.has(key)) {
        violations.set(
          key,
          [
            `${key} (case ${n})`,
            `  request: ${describeRequest(req)}`,
            `  answer: ${res.status} ${res.body.slice(0, 600)}`,
            `  log: ${target.logsOf(`fz-${n}`)}`,
          ].join('\n'),
        );
      }
      // Past this many distinct problems, more cases add noise, not news.
      if (violations.size >= 30) throw new Error('30 distinct violations: stopping early');
    }),
    { seed: opts.seed, numRuns: opts.numRuns, endOnFailure: true },
  ).catch((err: unknown) => {
    // A case that could not be sent or answered at all (a dropped connection, a hung request).
    if (violations.size < 30) throw new Error(`${target.name}: the run broke off (replay with FUZZ_SEED=${SEED}): ${(err as Error).message}`, { cause: err });
  });
  if (violations.size > 0) {
    throw new Error(`${target.name}: ${violations.size} distinct violations (seed ${opts.seed}; replay with FUZZ_SEED=${SEED}):\n${[...violations.values()].join('\n')}`);
  }
  return stats;
}

function summary(name: string, stats: RunStats, ms: number): string {
  return `${name}: ${stats.cases} cases (${stats.unsendable} unsendable) over ${stats.operations.size} operations in ${(ms / 1000).toFixed(1)} s; ${JSON.stringify(stats.statuses)}; 502 by operation ${JSON.stringify(stats.upstream)}; seed ${SEED}`;
}

// ---------------------------------------------------------------------------------------------
// In-process: the embedded runtime (PGlite, in-process bus, an agent worker, a fake model).

function configLines(fakeUrl: string, requireAuth = false): string[] {
  return [
    `server: {host: 127.0.0.1, port: 0, body_limit: ${BODY_LIMIT}}`,
    'models:',
    // The fuzzer rewrites the default provider (PUT /config/models) and the providers it names
    // (fz_spare, and fake: fz_agent's, so a chat may meet a broken provider and answer 502).
    '  default_provider: fz_spare',
    `  providers: {fake: {base_url: "${fakeUrl}", api_key: "${PROVIDER_KEY}", model: fake-model}, fz_spare: {base_url: "${fakeUrl}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
    `security: {requireAuth: ${requireAuth}, users: {admin: "${ADMIN_PASSWORD}"}}`,
  ];
}

interface Embedded {
  runtime: Runtime;
  app: FastifyInstance;
  target: Target;
  jwt: string;
  doc: OpenApiDocument;
  cwd: string;
}

async function startEmbedded(name: string, fake: FakeModel, requireAuth: boolean): Promise<Embedded> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-fuzz-'));
  fs.writeFileSync(path.join(cwd, 'config.yaml'), configLines(fake.url, requireAuth).join('\n'));
  const logs: string[] = [];
  const runtime = await bootstrap({
    service: 'fuzz',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'fuzz-master-key-0123456789-abcdefghij' },
    cwd,
    logDestination: {
      write: (line: string) => {
        logs.push(line);
        if (logs.length > 20_000) logs.splice(0, 10_000);
      },
    },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await startAgentWorker(runtime);
  // No channel-connector: outbound sends stay queued and answer 502 after a short wait.
  await seedGateway(runtime);
  const app = await buildGateway(runtime, { sendWaitMs: 200 });
  await app.ready();
  runtime.health.markStarted();
  const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: 'admin', password: ADMIN_PASSWORD } });
  if (login.statusCode !== 200) throw new Error(`login: ${login.statusCode} ${login.body}`);
  const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as OpenApiDocument;
  return { runtime, app, target: injectTarget(name, app, logs), jwt: (login.json() as { token: string }).token, doc, cwd };
}

describe('fuzzing every operation of the OpenAPI document', () => {
  let fake: FakeModel;
  const started: Embedded[] = [];

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
  });
  afterAll(async () => {
    for (const e of started) {
      await e.app.close();
      await e.runtime.lifecycle.shutdown('test');
      fs.rmSync(e.cwd, { recursive: true, force: true });
    }
    await fake?.close();
  });

  for (const requireAuth of [false, true]) {
    it(`in process, requireAuth ${requireAuth}: no 5xx, every error {error: string}, the service stays usable`, { timeout: 150_000 }, async () => {
      const e = await startEmbedded(`embedded(requireAuth=${requireAuth})`, fake, requireAuth);
      started.push(e);
      const ops = operationsOf(e.doc);
      expect(ops.length).toBeGreaterThan(80);
      // Every schema the cases are generated from is a schema a validator accepts.
      const ajv = new Ajv({ strict: false, validateFormats: false });
      for (const op of ops) {
        for (const schema of [...op.params.map((p) => p.schema), ...(op.body ? [op.body.schema] : [])]) {
          expect(() => ajv.compile(schema), op.key).not.toThrow();
        }
      }
      const began = Date.now();
      const stats = await fuzz(e.target, ops, { numRuns: CASES_PER_AUTH_MODE, jwt: e.jwt, setup: { requireAuth, fakeUrl: fake.url }, seed: SEED + (requireAuth ? 1 : 0) });
      console.info(summary(e.target.name, stats, Date.now() - began));
      // The run reached (almost) every operation and produced both successes and refusals.
      expect(stats.operations.size).toBeGreaterThan(ops.length * 0.9);
      expect(stats.statuses['2xx']).toBeGreaterThan(CASES_PER_AUTH_MODE / 20);
      expect(stats.statuses['4xx']).toBeGreaterThan(CASES_PER_AUTH_MODE / 4);
      await ensureFixtures(e.target, e.jwt, { requireAuth, fakeUrl: fake.url }, { cronIds: [], sessionIds: [] });
      await checkUsable(e.target, e.jwt, ops);
      expect((await e.app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
      if (requireAuth) expect((await e.app.inject({ method: 'GET', url: '/api/v1/agents' })).statusCode).toBe(401);
    });
  }
});

describeWithServers('fuzzing a cluster-mode gateway process over HTTP, requireAuth true', () => {
  let fake: FakeModel;
  let cluster: TestCluster;

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    cluster = await startTestCluster({ configLines: configLines(fake.url, true), workers: 1 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  it('answers every case below 500 with {error} bodies, and the process is alive and ready afterwards', { timeout: 150_000 }, async () => {
    const gateway = cluster.local.byRole.gateway[0]!;
    const base = new URL(cluster.local.gatewayUrls[0]!);
    const target = httpTarget('cluster gateway', base, () => gateway.output());
    const login = await fetch(`${base.origin}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
    });
    expect(login.status).toBe(200);
    const jwt = ((await login.json()) as { token: string }).token;
    const doc = (await (await fetch(`${base.origin}/api/v1/openapi.json`)).json()) as OpenApiDocument;
    // Outbound sends wait up to 30 s for a platform that, with no channel-connector here, never
    // answers; the in-process runs cover them with a short wait.
    const ops = operationsOf(doc).filter((op) => !op.key.startsWith('POST /api/v1/channels/{platform}/send'));
    const began = Date.now();
    const stats = await fuzz(target, ops, { numRuns: CLUSTER_CASES, jwt, setup: { requireAuth: true, fakeUrl: fake.url }, seed: SEED + 2 });
    console.info(summary(target.name, stats, Date.now() - began));
    // What Node's HTTP parser refuses before fastify sees a request is answered {error} too.
    for (const raw of [
      `GET /api/v1/agents HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`,
      `GET /api/v1/agents HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n`,
      'BREW /\u0000 HTCPCP/1.0\r\n\r\n',
    ]) {
      const answer = await rawExchange(base, raw);
      expect(answer, answer).toMatch(/^HTTP\/1\.1 4\d\d /);
      expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toMatch(/^\{"error":"[^"]+"\}$/);
    }
    expect(gateway.proc.exitCode).toBeNull();
    expect(gateway.proc.signalCode).toBeNull();
    const ready = await fetch(`${base.origin}/ready`);
    expect(ready.status, await ready.text()).toBe(200);
    await ensureFixtures(target, jwt, { requireAuth: true, fakeUrl: fake.url }, { cronIds: [], sessionIds: [] });
    await checkUsable(target, jwt, ops);
    expect((await fetch(`${base.origin}/api/v1/agents`)).status).toBe(401);
    expect((await fetch(`${base.origin}/%61pi/v1/agents`)).status).toBe(401);
  });
});
