import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './auth-harness.js';

/**
 * `GET /api/v1/openapi.json`: a well-formed OpenAPI 3 document, produced from the route schemas,
 * that lists every route the gateway registers and describes every request body.
 */
const PROVIDER_KEY = 'sk-provider-key-for-the-document-test';
const YAML = `
server: {host: 127.0.0.1}
models:
  default_provider: p
  providers:
    p: {base_url: "http://127.0.0.1:1/v1", api_key: "${PROVIDER_KEY}", model: m}
security:
  requireAuth: true
  users: {admin: "admin-password-for-the-document"}
`;

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema?: Record<string, unknown>;
}
interface Operation {
  operationId?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema?: Record<string, unknown> }> };
  responses: Record<string, { description: string; content?: Record<string, { schema?: Record<string, unknown> }> }>;
  security?: Array<Record<string, string[]>>;
}
interface Document {
  openapi: string;
  info: { title: string; version: string };
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas?: Record<string, unknown>; securitySchemes: Record<string, unknown> };
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** Writes that take no body: actions named by their path alone. */
const BODYLESS_WRITES = new Set([
  'POST /api/v1/auth/api-key',
  'POST /api/v1/agents/{agentId}/reload',
  'POST /api/v1/rules/{id}/reload',
  'POST /api/v1/agents/{agentId}/rules/{id}/reload',
  'POST /api/v1/config/models/providers/{name}/test',
  'POST /api/v1/config/models/reload',
  'POST /api/v1/sessions/{id}/compact',
  'POST /api/v1/runs/{runId}/cancel',
  'POST /api/v1/responses/{id}/cancel',
]);

/**
 * `METHOD /path/{param}` of every route fastify registered, read from `printRoutes()`'s tree
 * (each line a path segment under its parent, with the methods it answers); HEAD routes are
 * fastify's automatic twins of GET and are left out, as the document leaves them out.
 */
function registeredRoutes(tree: string): string[] {
  const stack: string[] = [];
  const out: string[] = [];
  for (const line of tree.split('\n')) {
    const at = line.indexOf('── ');
    if (at < 0) continue;
    const depth = (at - 1) / 4;
    const m = /^(\S+?)(?: \(([A-Z, ]+)\))?$/.exec(line.slice(at + 3).trim());
    if (!m) throw new Error(`unexpected printRoutes line: ${line}`);
    stack.length = depth;
    const full = (stack[depth - 1] ?? '') + m[1];
    stack.push(full);
    for (const method of (m[2] ?? '').split(', ').filter(Boolean)) {
      if (method !== 'HEAD') out.push(`${method} ${full.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    }
  }
  return out.sort();
}

/** Every `$ref` in the document, and whether it points at something. */
function refs(node: unknown, doc: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) refs(n, doc, found);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') found.push(v);
      else refs(v, doc, found);
    }
  }
  return found;
}

function resolves(ref: string, doc: unknown): boolean {
  if (!ref.startsWith('#/')) return false;
  let node = doc;
  for (const part of ref.slice(2).split('/')) {
    if (!node || typeof node !== 'object' || !(part in node)) return false;
    node = (node as Record<string, unknown>)[part];
  }
  return node !== undefined;
}

let h: Harness;
let doc: Document;
let raw = '';

beforeAll(async () => {
  h = await startHarness(YAML);
  const res = await h.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  raw = res.body;
  doc = res.json() as Document;
}, 60_000);
afterAll(async () => {
  await h?.close();
});

describe('GET /api/v1/openapi.json', () => {
  it('is public even when requireAuth is true, and holds no secret', { timeout: 10_000 }, async () => {
    // Fetched above without any Authorization header; a management route is refused meanwhile.
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/config' })).statusCode).toBe(401);
    expect(raw).not.toContain(PROVIDER_KEY);
    expect(raw).not.toContain('admin-password-for-the-document');
    expect(raw).not.toContain('127.0.0.1:1');
  });

  it('is an OpenAPI 3 document titled Agentry with the gateway package version', { timeout: 10_000 }, () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
    expect(doc.info).toMatchObject({ title: 'Agentry', version: pkg.version });
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(Object.keys(doc.paths).length).toBeGreaterThan(50);
  });

  it('lists every route fastify registered, and nothing else', { timeout: 10_000 }, () => {
    const documented = Object.entries(doc.paths)
      .flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`))
      .sort();
    // Left out: the harness's stand-in chat route (no part of the product) and the CORS plugin's
    // preflight answer for every path (`OPTIONS *`), which is no operation.
    const registered = registeredRoutes(h.app.printRoutes({ commonPrefix: false })).filter((r) => r !== 'POST /api/v1/test-chat' && r !== 'OPTIONS *');
    expect(registered.length).toBeGreaterThan(80);
    expect(documented).toEqual(registered);
    // Spot checks of the spec's paths.
    for (const r of ['POST /api/v1/chat/completions', 'GET /api/v1/agents/{agentId}/workspace/entries', 'PUT /api/v1/cron/{id}/toggle', 'GET /health']) {
      expect(documented).toContain(r);
    }
  });

  it('is well formed: unique operation ids, declared tags, path parameters, responses, resolvable refs', { timeout: 10_000 }, () => {
    const tags = new Set(doc.tags.map((t) => t.name));
    const ids = new Set<string>();
    for (const [p, ops] of Object.entries(doc.paths)) {
      expect(p).toMatch(/^\/[^:]*$/);
      const templated = [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      for (const [method, op] of Object.entries(ops)) {
        const name = `${method.toUpperCase()} ${p}`;
        expect(METHODS, name).toContain(method);
        expect(op.operationId, name).toMatch(/^[a-z]+[A-Za-z0-9]*$/);
        expect(ids.has(op.operationId!), `duplicate operationId ${op.operationId}`).toBe(false);
        ids.add(op.operationId!);
        expect(op.tags?.length, name).toBe(1);
        expect(tags.has(op.tags![0]!), `${name}: tag ${op.tags![0]} is not declared`).toBe(true);
        const params = op.parameters ?? [];
        for (const param of params) {
          expect(['path', 'query', 'header', 'cookie'], name).toContain(param.in);
          expect(param.schema, `${name} ${param.name}`).toBeTypeOf('object');
        }
        const inPath = params.filter((x) => x.in === 'path');
        expect(inPath.map((x) => x.name).sort(), name).toEqual(templated);
        for (const x of inPath) expect(x.required, `${name} ${x.name}`).toBe(true);
        expect(Object.keys(op.responses).length, name).toBeGreaterThan(0);
        for (const code of Object.keys(op.responses)) expect(code, name).toMatch(/^([1-5](\d\d|XX)|default)$/);
        // Every error answer is documented: OpenAI's error object on the OpenAI-compatible
        // routes, {error: string} on the management API.
        const openai = /^\/api\/v1\/(?:chat\/completions|responses|models)(?:\/|$)/.test(p);
        expect(op.responses['4XX']?.content?.['application/json']?.schema, name).toMatchObject({
          type: 'object',
          required: ['error'],
          properties: { error: openai ? { type: 'object', required: ['message', 'type', 'param', 'code'] } : { type: 'string' } },
        });
        for (const requirement of op.security ?? []) {
          for (const scheme of Object.keys(requirement)) expect(doc.components.securitySchemes, name).toHaveProperty(scheme);
        }
      }
    }
    for (const ref of refs(doc, doc)) expect(resolves(ref, doc), ref).toBe(true);
  });

  it('describes a request body for every route that takes one', { timeout: 10_000 }, () => {
    const missing: string[] = [];
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const name = `${method.toUpperCase()} ${p}`;
        if (!['post', 'put', 'patch'].includes(method)) {
          expect(op.requestBody, name).toBeUndefined();
          continue;
        }
        if (BODYLESS_WRITES.has(name)) {
          expect(op.requestBody, `${name} takes no body`).toBeUndefined();
          continue;
        }
        const content = op.requestBody?.content ?? {};
        if (Object.keys(content).length === 0 || Object.values(content).some((c) => !c.schema)) missing.push(name);
      }
    }
    expect(missing).toEqual([]);
  });

  it('derives the schemas from the routes: the agent DSL, an upload, the config patch, a paged query', { timeout: 10_000 }, () => {
    const agents = doc.paths['/api/v1/agents']!;
    expect(agents.post!.requestBody!.content['application/json']!.schema).toMatchObject({
      type: 'object',
      required: ['ruleChain', 'metadata'],
      properties: { ruleChain: { required: ['id', 'name'] }, metadata: { required: ['nodes', 'connections'] } },
    });
    expect(agents.get!.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ in: 'query', name: 'page', schema: expect.objectContaining({ type: 'integer', minimum: 1 }) }),
        expect.objectContaining({ in: 'query', name: 'size', schema: expect.objectContaining({ type: 'integer', minimum: 1, maximum: 100 }) }),
      ]),
    );
    for (const p of ['/api/v1/skills/upload', '/api/v1/agents/{agentId}/skills/upload']) {
      const body = doc.paths[p]!.post!.requestBody!.content;
      expect(Object.keys(body), p).toEqual(['multipart/form-data']);
      expect(body['multipart/form-data']!.schema, p).toMatchObject({ required: ['file'], properties: { file: { type: 'string', format: 'binary' } } });
    }
    expect(doc.paths['/api/v1/config']!.put!.requestBody!.content['application/json']!.schema).toMatchObject({
      properties: { server: { properties: { port: { type: 'integer' } } }, security: { properties: { requireAuth: { type: 'boolean' } } } },
    });
    // Auth is described per route: the document itself and login are open, management is not.
    expect(doc.paths['/api/v1/openapi.json']!.get!.security).toEqual([]);
    expect(doc.paths['/api/v1/auth/login']!.post!.security).toEqual([]);
    expect(doc.paths['/api/v1/agents']!.get!.security).toEqual([{ bearerAuth: [] }]);
  });
});

describe('declared answers', () => {
  it('shows the success schema a route declares, next to the shared error answer', () => {
    const json = (op: Operation, code: string) => op.responses[code]?.content?.['application/json']?.schema;
    const agents = doc.paths['/api/v1/agents']!;
    expect(json(agents.get!, '200')).toMatchObject({ properties: { data: { type: 'array' }, total: { type: 'integer' } } });
    expect(json(agents.post!, '201')).toMatchObject({ properties: { ruleChain: { type: 'object' }, metadata: { type: 'object' } } });
    expect(json(doc.paths['/api/v1/auth/login']!.post!, '200')).toMatchObject({ required: ['token', 'expireAt'] });
    expect(json(doc.paths['/api/v1/users']!.get!, '200')).toMatchObject({ properties: { users: { type: 'array' } } });
    expect(json(agents.get!, '4XX')).toMatchObject({ properties: { error: { type: 'string' } }, required: ['error'] });
    // A route declaring none is still shown as a bare success.
    expect(Object.keys(doc.paths['/health']!.get!.responses)).toContain('2XX');
  });
});
