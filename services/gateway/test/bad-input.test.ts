import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toAppError } from '@agentry/gateway';
import { startHarness, type Harness } from './auth-harness.js';

/**
 * Inputs the fuzzer (e2e/fuzz.test.ts) found answered 5xx or with a body other than `{error}`,
 * each pinned here: the answer is a 4xx `{error: string}` and nothing is stored.
 */
const YAML = `
server: {host: 127.0.0.1}
models:
  default_provider: p
  providers:
    p: {base_url: "http://127.0.0.1:1/v1", model: m}
`;

const AGENT = {
  ruleChain: { id: 'bad_input', name: 'Bad input' },
  metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p' } }], connections: [] },
};

let h: Harness;

beforeAll(async () => {
  h = await startHarness(YAML);
  const created = await h.app.inject({ method: 'POST', url: '/api/v1/agents', payload: AGENT });
  expect(created.statusCode, created.body).toBe(201);
}, 60_000);
afterAll(async () => {
  await h?.close();
});

async function expectError(res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number, message: RegExp) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['error']);
  // The OpenAI-compatible routes answer OpenAI's error object, with the same message.
  const error = body.error as string | { message: string };
  expect(typeof error === 'string' ? error : error.message).toMatch(message);
}

describe('bad input the router refuses', () => {
  it('a malformed percent-encoding in the path: 400 {error}', { timeout: 10_000 }, async () => {
    await expectError(await h.app.inject({ method: 'GET', url: '/api/v1/agents/%zz' }), 400, /^Invalid request: the URL is not valid/);
  });

  it('a path parameter longer than the router takes: 414 {error}, without echoing it', { timeout: 10_000 }, async () => {
    const res = await h.app.inject({ method: 'GET', url: `/api/v1/sessions/${'é'.repeat(2000)}/messages` });
    await expectError(res, 414, /^URL too long/);
    expect(res.body.length).toBeLessThan(200);
  });
});

describe('values the database cannot store', () => {
  it('a NUL character in a path parameter, a query value and a JSON body: 400 {error}', { timeout: 10_000 }, async () => {
    await expectError(await h.app.inject({ method: 'GET', url: '/api/v1/cron/a%00b' }), 400, /NUL/);
    await expectError(await h.app.inject({ method: 'GET', url: '/api/v1/sessions?agentId=a%00b' }), 400, /NUL/);
    const dsl = { ...AGENT, ruleChain: { id: 'nul_agent', name: 'has a \u0000 in it' } };
    await expectError(await h.app.inject({ method: 'POST', url: '/api/v1/agents', payload: dsl }), 400, /NUL/);
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/agents/nul_agent' })).statusCode).toBe(404);
  });

  it('a page far beyond any list: 400 {error}', { timeout: 10_000 }, async () => {
    await expectError(await h.app.inject({ method: 'GET', url: '/api/v1/agents?page=99999999999999999999' }), 400, /page/);
  });

  it('maps data exceptions of the database to 400, a vanished foreign key to 404, other database errors to 500', { timeout: 10_000 }, () => {
    expect(toAppError(Object.assign(new Error('invalid byte sequence'), { code: '22021', severity: 'ERROR' }))).toMatchObject({ status: 400, code: 'VALIDATION' });
    expect(toAppError(Object.assign(new Error('bigint out of range'), { code: '22003', severity: 'ERROR' }))).toMatchObject({ status: 400 });
    expect(toAppError(Object.assign(new Error('stack depth limit exceeded'), { code: '54001', severity: 'ERROR' }))).toMatchObject({ status: 400 });
    // An agent deleted between the existence check and the insert of one of its rows.
    expect(toAppError(Object.assign(new Error('violates foreign key constraint'), { code: '23503', severity: 'ERROR' }))).toMatchObject({ status: 404 });
    expect(toAppError(Object.assign(new Error('relation does not exist'), { code: '42P01', severity: 'ERROR' }))).toMatchObject({ status: 500 });
    // Something else with a five-letter code is no database error.
    expect(toAppError(Object.assign(new Error('x'), { code: '22021' }))).toMatchObject({ status: 500 });
  });
});

describe('bodies that are not what they claim', () => {
  it('an empty JSON body: nothing to parse on a route that takes none (the Python SDK sends one on DELETE), 400 on one that takes a body', { timeout: 10_000 }, async () => {
    const made = await h.app.inject({ method: 'POST', url: '/api/v1/agents', payload: { ...AGENT, ruleChain: { id: 'empty-body', name: 'Empty body' } } });
    expect(made.statusCode, made.body).toBe(201);
    const json = { 'content-type': 'application/json' };
    const deleted = await h.app.inject({ method: 'DELETE', url: '/api/v1/agents/empty-body', headers: json, payload: '' });
    expect(deleted.statusCode, deleted.body).toBeLessThan(300);
    await expectError(await h.app.inject({ method: 'POST', url: '/api/v1/agents', headers: json, payload: '' }), 400, /the body is empty/);
    // A bodyless POST whose schema declares no body (the SDK's responses.cancel): not a JSON error.
    const cancel = await h.app.inject({ method: 'POST', url: '/api/v1/runs/no-such-run/cancel', headers: json, payload: '' });
    expect(cancel.body).not.toMatch(/the body is empty/);
  });

  it('JSON nested 10,000 deep: 400 {error} before anything walks it', { timeout: 10_000 }, async () => {
    const deep = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    const payload = `{"ruleChain":{"id":"deep","name":"deep","additionalInfo":${deep}},"metadata":{"nodes":[],"connections":[]}}`;
    const res = await h.app.inject({ method: 'POST', url: '/api/v1/rules', headers: { 'content-type': 'application/json' }, payload });
    await expectError(res, 400, /nested deeper than 64 levels/);
    // Brackets inside strings (escaped quotes included) do not count.
    const brackets = { ...AGENT, ruleChain: { id: 'brackets', name: `"\\${'['.repeat(150)}` } };
    expect((await h.app.inject({ method: 'POST', url: '/api/v1/agents', payload: brackets })).statusCode).toBe(201);
  });

  it('a truncated multipart upload and one without a boundary: 4xx {error}', { timeout: 10_000 }, async () => {
    const boundary = '----bad-input';
    const truncated = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\nContent-Type: application/zip\r\n\r\nPK\u0003\u0004`);
    const res = await h.app.inject({
      method: 'POST',
      url: '/api/v1/agents/bad_input/skills/upload',
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: truncated,
    });
    await expectError(res, 400, /^Invalid request: the multipart body could not be read/);
    const noBoundary = await h.app.inject({ method: 'POST', url: '/api/v1/skills/upload', headers: { 'content-type': 'multipart/form-data' }, payload: truncated });
    expect(noBoundary.statusCode).toBeGreaterThanOrEqual(400);
    expect(noBoundary.statusCode).toBeLessThan(500);
    expect(Object.keys(noBoundary.json() as object)).toEqual(['error']);
  });
});

describe('keys that could never be used', () => {
  it('a provider key beyond visible ASCII and an api account key a Bearer header cannot carry: 400', { timeout: 10_000 }, async () => {
    await expectError(
      await h.app.inject({ method: 'PUT', url: '/api/v1/config/models/providers/p/api-key', payload: { apiKey: 'sk-İstanbul-0123456789' } }),
      400,
      /apiKey/,
    );
    await expectError(
      await h.app.inject({ method: 'POST', url: '/api/v1/channels/api/accounts', payload: { id: 'spaces', api_key: 'sk has spaces in it 0123456789' } }),
      400,
      /api_key: letters, digits/,
    );
    expect((await h.app.inject({ method: 'GET', url: '/api/v1/channels/api/accounts/spaces' })).statusCode).toBe(404);
  });
});
