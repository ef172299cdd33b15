import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

/** The gateway on an embedded runtime (PGlite in memory, in-process bus), driven by inject(). */
let runtime: Runtime;
let app: FastifyInstance;
let cwd: string;
const logLines: string[] = [];

beforeAll(async () => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-gw-'));
  fs.writeFileSync(
    path.join(cwd, 'config.yaml'),
    [
      'server: {body_limit: 2048}',
      'models:',
      '  default_provider: p1',
      '  providers:',
      '    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-very-secret, models: [{name: m1}, {name: m2, alias: default}]}',
      '    p2: {base_url: "https://example.invalid/v1", model: big}',
      'security:',
      '  users: {admin: "adminpw:sk-admin-key-0123456789", bob: bobpassword}',
    ].join('\n'),
  );
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  runtime = await bootstrap({
    service: 'gateway-test',
    mode: 'embedded',
    argv: [],
    env: {},
    cwd,
    logDestination: sink,
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await seedGateway(runtime);
  app = await buildGateway(runtime);
  await app.ready();
  runtime.health.markStarted();
});

afterAll(async () => {
  await app.close();
  await runtime.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

describe('probes', () => {
  it('GET /health is plain OK', async () => {
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('OK');
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
  });

  it('GET /ready reports the database', async () => {
    const res = await app.inject({ method: 'GET', url: '/ready' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ready', checks: { database: { ok: true } } });
  });

  it('GET /ready is 503 with {error} when a dependency fails', async () => {
    runtime.health.register('flaky', async () => {
      throw new Error('connection refused');
    });
    try {
      const res = await app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toBe('not ready: flaky: connection refused');
    } finally {
      runtime.health.register('flaky', async () => {});
    }
  });

  it('GET /metrics is Prometheus text with request durations', async () => {
    await app.inject({ method: 'GET', url: '/health' });
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).toMatch(/http_request_duration_seconds_count\{service="gateway-test",method="GET",route="\/health",status="200"\} \d+/);
  });
});

describe('GET /api/v1/config', () => {
  it('returns exactly the spec shape, secrets hidden', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/config' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      server: { host: '0.0.0.0', port: 9527 },
      data: { root_dir: './data', logs_dir: './data/logs' },
      models: {
        default_provider: 'p1',
        providers: {
          p1: { id: 'p1', name: 'One', base_url: 'http://127.0.0.1:1/v1', model: 'm2', models: [{ name: 'm1' }, { name: 'm2', alias: 'default' }] },
          p2: { id: 'p2', name: 'p2', base_url: 'https://example.invalid/v1', model: 'big', models: [] },
        },
      },
      security: { requireAuth: false, users: { admin: true, bob: true }, allowFrom: { management: [], chat: [] } },
    });
    expect(res.body).not.toMatch(/sk-very-secret|adminpw|sk-admin-key|bobpassword/);
  });
});

describe('PUT /api/v1/config', () => {
  const put = (payload: unknown) => app.inject({ method: 'PUT', url: '/api/v1/config', payload: payload as object });

  it('changes editable keys, persists them and answers with the new view', async () => {
    const res = await put({ server: { port: 9600 }, models: { default_provider: 'p2' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ server: { host: '0.0.0.0', port: 9600 }, models: { default_provider: 'p2' } });
    const { listSettings } = await import('@agentry/db');
    const stored = Object.fromEntries((await listSettings(runtime.db.db, 'config.live.')).map((s) => [s.key, s.value]));
    expect(stored).toMatchObject({ 'config.live.server.port': 9600, 'config.live.models.default_provider': 'p2' });
    expect((await app.inject({ method: 'GET', url: '/api/v1/config' })).json().server.port).toBe(9600);
  });

  it.each([
    [{ server: { port: 'abc' } }, 'Invalid input: server.port: must be integer'],
    [{ server: { port: 70000 } }, 'Invalid input: server.port: must be <= 65535'],
    [{ data: { root_dir: '/tmp' } }, 'Invalid input: data cannot be changed through this endpoint'],
    [{ server: { body_limit: 5 } }, 'Invalid input: server.body_limit cannot be changed through this endpoint'],
    [{ security: { users: { eve: 'x' } } }, 'Invalid input: security.users cannot be changed through this endpoint'],
    [{ models: { default_provider: 'nope' } }, 'Invalid input: models.default_provider: "nope" is not one of models.providers'],
    [[1, 2], 'Invalid input: body must be a JSON object'],
  ])('rejects %j with 400 and a message naming the key', async (body, error) => {
    const before = (await app.inject({ method: 'GET', url: '/api/v1/config' })).json();
    const res = await put(body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error });
    expect((await app.inject({ method: 'GET', url: '/api/v1/config' })).json()).toEqual(before);
  });
});

describe('error model', () => {
  it('unknown route: 404 {error}', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/nothing-here?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'Route not found: GET /api/v1/nothing-here' });
  });

  it('malformed JSON: 400 {error}', async () => {
    const res = await app.inject({ method: 'PUT', url: '/api/v1/config', headers: { 'content-type': 'application/json' }, payload: '{"server":' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'Malformed JSON body' });
  });

  it('empty JSON body: 400 {error}', async () => {
    const res = await app.inject({ method: 'PUT', url: '/api/v1/config', headers: { 'content-type': 'application/json' }, payload: '' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^Malformed JSON body/);
  });

  it('body over the limit: 413 {error}', async () => {
    const res = await app.inject({ method: 'PUT', url: '/api/v1/config', payload: { server: { host: 'x'.repeat(4096) } } });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: 'Request body too large' });
  });

  it('wrong content type: 415 {error}', async () => {
    const res = await app.inject({ method: 'PUT', url: '/api/v1/config', headers: { 'content-type': 'text/csv' }, payload: 'a,b' });
    expect(res.statusCode).toBe(415);
    expect(res.json().error).toMatch(/^Unsupported content type/);
  });

  it('unexpected failure: 500 with the request id, details only in the log', async () => {
    const sub = await buildGateway(runtime);
    sub.get('/boom', { config: { access: 'public' } }, async () => {
      throw new Error('secret internal detail');
    });
    const res = await sub.inject({ method: 'GET', url: '/boom', headers: { 'x-request-id': 'req-boom-1' } });
    await sub.close();
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'Internal server error (request id req-boom-1)' });
    expect(logLines.some((l) => l.includes('secret internal detail') && l.includes('"reqId":"req-boom-1"'))).toBe(true);
  });
});

describe('request ids and logs', () => {
  it('echoes a valid x-request-id and generates one otherwise', async () => {
    const kept = await app.inject({ method: 'GET', url: '/api/v1/config', headers: { 'x-request-id': 'abc-123' } });
    expect(kept.headers['x-request-id']).toBe('abc-123');
    const made = await app.inject({ method: 'GET', url: '/api/v1/config', headers: { 'x-request-id': 'bad id with spaces' } });
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('writes JSON log lines that carry the request id', async () => {
    await app.inject({ method: 'GET', url: '/api/v1/config', headers: { 'x-request-id': 'trace-me-42' } });
    const mine = logLines.map((l) => JSON.parse(l)).filter((l) => l.reqId === 'trace-me-42');
    expect(mine.length).toBeGreaterThanOrEqual(2); // incoming request + request completed
    for (const line of mine) expect(line.service).toBe('gateway-test');
  });

  it('never logs a secret from the configuration or an Authorization header', async () => {
    await app.inject({ method: 'GET', url: '/api/v1/config', headers: { authorization: 'Bearer sk-header-secret' } });
    const all = logLines.join('\n');
    expect(all).not.toMatch(/sk-very-secret|adminpw|sk-admin-key|bobpassword|sk-header-secret/);
  });
});

describe('CORS with no origin listed (the default)', () => {
  it('answers no origin: no Access-Control-Allow-Origin, no Vary, and a preflight is refused', async () => {
    const read = await app.inject({ method: 'GET', url: '/health', headers: { origin: 'https://app.example' } });
    expect(read.statusCode).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBeUndefined();
    expect(read.headers['vary']).toBeUndefined();
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/v1/chat/completions',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.statusCode).toBeGreaterThanOrEqual(400);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.headers['access-control-allow-methods']).toBeUndefined();
  });
});
