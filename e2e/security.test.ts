import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { createRedisBus } from '@agentry/bus/redis';
import { deleteUsersExcept } from '@agentry/db';
import { builtinTools } from '@agentry/engine';
import { bootstrap, type BootstrapOptions, type Runtime } from '@agentry/runtime';
import {
  answerMcp,
  cleanupRedisPrefix,
  createTestPglite,
  deflatedZeros,
  describeWithRedis,
  multipart,
  rawZip,
  redisUrl,
  startFakeModel,
  uniqueRedisPrefix,
  type FakeModel,
  type FakeRequest,
} from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { OPENAI_ROUTE, openaiErrorMessage } from './openai-error.js';

/**
 * The attack catalogue (OWASP API Security Top 10 2023, RFC 8725, Zip Slip): one named test per
 * attack, against the real gateway of an embedded runtime (requireAuth on) through inject(), with
 * an in-process agent worker and the fake model scripting tool calls for the SSRF cases. What a
 * unit test already proves at the same level is not repeated here; these go through the whole
 * stack (login, live credential changes, real agent runs, the database behind the routes).
 */

const PASSWORDS = { admin: 'admin-pass-word-1', bob: 'bob-pass-word-1', carol: 'carol-pass-word-1', dave: 'dave-pass-word-1' };
const BOB_KEY = 'sk-bob-user-key-0123456789abcdef';
const JWT_SECRET = 'e2e-security-jwt-secret-0123456789';
const BODY_LIMIT = 64 * 1024;
const MAX_FILE = 4096;
/** Chat budget of every credential in the main runtime: small, so each chatting test uses a fresh key. */
const CHAT_LIMIT = 3;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-security-'));
let runtime: Runtime;
let app: FastifyInstance;
let fake: FakeModel;
let target: http.Server;
/** Requests the local target server received (it stands for anything on a private network). */
const hits: string[] = [];
let targetPort = 0;
let admin = '';
let bob = '';

function startTarget(): Promise<http.Server> {
  const server = http.createServer(async (req, res) => {
    hits.push(`${req.method} ${req.url}`);
    if (req.url === '/mcp') {
      await answerMcp(req, res, 'internal', (mcp) =>
        mcp.registerTool('secrets', { description: 'Reads internal secrets.' }, async () => ({ content: [{ type: 'text', text: 'internal-secret' }] })),
      );
      return;
    }
    if (req.url === '/to-metadata') {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('internal-data');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function newRuntime(name: string, yaml: string, openBus: NonNullable<BootstrapOptions['openBus']> = (logger) => createMemoryBus({ logger })): Promise<Runtime> {
  const cwd = fs.mkdtempSync(path.join(tmp, `${name}-`));
  fs.writeFileSync(path.join(cwd, 'config.yaml'), yaml);
  return bootstrap({
    service: `security-${name}`,
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'security-master-key-0123456789-abcdef' },
    cwd,
    logDestination: { write: () => {} },
    openDb: () => createTestPglite(),
    openBus,
  });
}

function uiFixture(): string {
  const dir = path.join(tmp, 'ui');
  fs.mkdirSync(path.join(dir, 'assets'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>Agentry</title><script type="module" src="/assets/app-1a2b.js"></script>');
  fs.writeFileSync(path.join(dir, 'assets', 'app-1a2b.js'), 'console.log(1);');
  return dir;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

function call(method: InjectOptions['method'], url: string, token?: string, payload?: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url: `/api/v1${url}`,
    headers: { ...(token ? auth(token) : {}), ...headers },
    ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }),
  });
}

async function ok(res: LightMyRequestResponse, status = 200): Promise<LightMyRequestResponse> {
  if (res.statusCode !== status) throw new Error(`${res.statusCode} (expected ${status}): ${res.body}`);
  return res;
}

async function login(username: string, password: string): Promise<string> {
  return ((await ok(await call('POST', '/auth/login', undefined, { username, password }))).json() as { token: string }).token;
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json() as { error?: unknown };
  expect(Object.keys(body)).toEqual(['error']);
  // The OpenAI-compatible routes answer OpenAI's error object; the management API `{error: string}`.
  const text = OPENAI_ROUTE.test(res.raw.req.url ?? '') ? openaiErrorMessage(body) : body.error;
  expect(typeof text).toBe('string');
  if (message) expect(text).toMatch(message);
}

let accounts = 0;
/** A fresh api account and its generated key: its own chat budget, optionally bound to agents. */
async function freshKey(bindTo?: string): Promise<string> {
  const id = `acct${++accounts}`;
  const res = await ok(await call('POST', '/channels/api/accounts', admin, { id, name: id, ...(bindTo ? { binding: { agentId: bindTo } } : {}) }), 201);
  return (res.json() as { apiKey: string }).apiKey;
}

function chat(key: string, model: string, content: string, extra: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return call('POST', '/chat/completions', key, { model, messages: [{ role: 'user', content }] }, extra);
}

function answer(res: LightMyRequestResponse): string {
  if (res.statusCode !== 200) throw new Error(`chat: ${res.statusCode} ${res.body}`);
  return (res.json() as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
}

/** The model's next turn: call `name` with `args`; the turn after repeats the tool's result as the answer. */
function scriptToolCall(name: string, args: unknown): void {
  fake.script({ toolCalls: [{ id: `c${Date.now()}`, name, arguments: JSON.stringify(args) }] }, (req: FakeRequest) => {
    const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
    return { text: String(result?.content ?? '(no tool result)') };
  });
}

async function createAgent(id: string, configuration: Record<string, unknown> = {}): Promise<void> {
  await ok(
    await call('POST', '/agents', admin, {
      ruleChain: { id, name: id },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', systemPrompt: `You are ${id}.`, ...configuration } }], connections: [] },
    }),
    201,
  );
}

async function createRestChain(id: string, extra: Record<string, unknown> = {}): Promise<void> {
  await ok(
    await call('POST', '/rules', admin, {
      ruleChain: { id, name: id },
      metadata: {
        nodes: [
          { id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: '${msg.url}', requestMethod: 'GET', readTimeoutMs: 5000, ...extra } },
          { id: 'end', type: 'end' },
        ],
        connections: [{ fromId: 'call', toId: 'end', type: 'Success' }],
      },
    }),
    201,
  );
}

beforeAll(async () => {
  fake = await startFakeModel();
  target = await startTarget();
  targetPort = (target.address() as AddressInfo).port;
  runtime = await newRuntime(
    'main',
    [
      `server: {host: 127.0.0.1, body_limit: ${BODY_LIMIT}}`,
      `workspace: {max_file_bytes: ${MAX_FILE}}`,
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
      'security:',
      '  requireAuth: true',
      `  jwtSecret: "${JWT_SECRET}"`,
      `  rateLimit: {chat: {requests: ${CHAT_LIMIT}, windowSeconds: 3600}}`,
      '  users:',
      `    admin: "${PASSWORDS.admin}"`,
      `    bob: "${PASSWORDS.bob}:${BOB_KEY}"`,
      `    carol: "${PASSWORDS.carol}"`,
      `    dave: "${PASSWORDS.dave}"`,
    ].join('\n'),
  );
  await startAgentWorker(runtime, { builtin: builtinTools });
  await seedGateway(runtime);
  app = await buildGateway(runtime, { uiDir: uiFixture() });
  await app.ready();
  runtime.health.markStarted();
  admin = await login('admin', PASSWORDS.admin);
  bob = await login('bob', PASSWORDS.bob);

  await createAgent('alpha');
  await createAgent('beta');
  await createAgent('fetcher', { tools: [{ type: 'builtin', name: 'http_fetch' }] });
  await createAgent('fetcher_open', { tools: [{ type: 'builtin', name: 'http_fetch', config: { allowHosts: ['127.0.0.1'] } }] });
  await createRestChain('rest');
  await createRestChain('rest_open', { allowHosts: ['127.0.0.1'] });
  await createAgent('caller', {
    tools: [
      { type: 'rulechain', name: 'call_api', targetId: 'rest', config: { parameters: { type: 'object', properties: { url: { type: 'string' } } } } },
      { type: 'rulechain', name: 'call_open', targetId: 'rest_open', config: { parameters: { type: 'object', properties: { url: { type: 'string' } } } } },
    ],
  });
  await createAgent('writer', { tools: ['write', 'read'].map((name) => ({ type: 'builtin', name })) });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await runtime?.lifecycle.shutdown('test');
  await Promise.all([fake?.close(), new Promise((r) => (target ? target.close(r) : r(undefined)))]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('JWT (RFC 8725): every forged, stale or foreign token is 401 {error}', { timeout: 20_000 }, () => {
  const secret = new TextEncoder().encode(JWT_SECRET);
  const now = () => Math.floor(Date.now() / 1000);
  const signed = (claims: Record<string, unknown>, opts: { iss?: string; exp?: number; nbf?: number; sub?: string } = {}) => {
    const jwt = new SignJWT({ tv: 0, ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(opts.iss ?? 'agentry')
      .setSubject(opts.sub ?? 'admin')
      .setIssuedAt()
      .setExpirationTime(opts.exp ?? now() + 600);
    if (opts.nbf !== undefined) jwt.setNotBefore(opts.nbf);
    return jwt.sign(secret);
  };
  const refused = async (token: string, message = /^Authentication required: invalid token$/) => {
    expectError(await call('GET', '/config', token), 401, message);
    expectError(await chat(token, 'alpha', 'hi'), 401, message);
  };

  it('a token made with the real secret and claims is accepted (the forgeries below differ in one thing)', async () => {
    expect((await call('GET', '/config', await signed({}))).statusCode).toBe(200);
  });

  it('alg "none" (unsigned) is refused', async () => {
    await refused(new UnsecuredJWT({ tv: 0 }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').encode());
  });

  it('an HS256 token signed with another key is refused', async () => {
    const other = new TextEncoder().encode('not-the-server-secret-0123456789');
    await refused(await new SignJWT({ tv: 0 }).setProtectedHeader({ alg: 'HS256' }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').sign(other));
  });

  it('algorithm confusion: RS256 and ES256 headers are refused (the algorithm is pinned server-side)', async () => {
    for (const alg of ['RS256', 'ES256'] as const) {
      const { privateKey } = await generateKeyPair(alg);
      await refused(await new SignJWT({ tv: 0 }).setProtectedHeader({ alg }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').sign(privateKey));
    }
    // HMAC with the server secret itself, under another HMAC algorithm name, is not HS256 either.
    await refused(await new SignJWT({ tv: 0 }).setProtectedHeader({ alg: 'HS512' }).setIssuer('agentry').setSubject('admin').setExpirationTime('1h').sign(secret));
  });

  it('an expired token is refused', async () => {
    await refused(await signed({}, { exp: now() - 5 }), /^Authentication required: token expired$/);
  });

  it('a token claiming a longer life than security.jwtExpireHours (24 h here) is refused, with or without iat', async () => {
    const day = 24 * 3600;
    expect((await call('GET', '/config', await signed({}, { exp: now() + day - 60 }))).statusCode).toBe(200);
    await refused(await signed({}, { exp: now() + 10 * 365 * day }));
    await refused(await signed({}, { exp: now() + day + 3600 }));
    const withoutIat = (exp?: number) => {
      const jwt = new SignJWT({ tv: 0 }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuer('agentry').setSubject('admin');
      if (exp !== undefined) jwt.setExpirationTime(exp);
      return jwt.sign(secret);
    };
    expect((await call('GET', '/config', await withoutIat(now() + 600))).statusCode).toBe(200);
    await refused(await withoutIat(now() + 10 * 365 * day));
    // No exp at all is a token for ever.
    await refused(await withoutIat());
    // An iat in the future does not stretch the allowance.
    await refused(await signed({ iat: now() + 365 * day }, { exp: now() + 365 * day + 600 }));
  });

  it('a token not valid before a future time (nbf) is refused', async () => {
    await refused(await signed({}, { nbf: now() + 600 }));
  });

  it('a token of another issuer is refused', async () => {
    await refused(await signed({}, { iss: 'someone-else' }));
  });

  it('a tampered payload (subject swapped after signing) is refused', async () => {
    const [head, , sig] = bob.split('.') as [string, string, string];
    const payload = Buffer.from(JSON.stringify({ tv: 0, iss: 'agentry', sub: 'admin', exp: now() + 600 })).toString('base64url');
    await refused(`${head}.${payload}.${sig}`);
  });

  it('a token of a user deleted since it was issued is refused', async () => {
    const dave = await login('dave', PASSWORDS.dave);
    expect((await call('GET', '/config', dave)).statusCode).toBe(200);
    await deleteUsersExcept(runtime.db.db, ['admin', 'bob', 'carol']);
    await runtime.bus.pubsub.publish('invalidate', { area: 'users' });
    await expect.poll(async () => (await call('GET', '/config', dave)).statusCode, { timeout: 5_000 }).toBe(401);
    await refused(dave);
  });

  it('a token issued before a password change is refused; the one the change returns works', async () => {
    const before = await login('carol', PASSWORDS.carol);
    const changed = await ok(await call('PUT', '/auth/password', before, { oldPassword: PASSWORDS.carol, newPassword: 'carol-new-pass-2' }));
    await refused(before);
    expect((await call('GET', '/config', (changed.json() as { token: string }).token)).statusCode).toBe(200);
  });

  it('a role claim in a valid token does not make a user an admin (the role comes from the user record)', async () => {
    const forged = await signed({ role: 'admin', admin: true }, { sub: 'bob' });
    expect((await call('GET', '/config', forged)).statusCode).toBe(200);
    expectError(await call('PUT', '/config', forged, { security: { requireAuth: false } }), 403, /only an admin/);
  });
});

describe('API keys (OWASP API2)', { timeout: 20_000 }, () => {
  it('the key of an api account disabled at run time stops working at once', async () => {
    const key = await freshKey();
    fake.script({ text: 'hello' });
    expect(answer(await chat(key, 'alpha', 'hi'))).toBe('hello');
    await ok(await call('PUT', `/channels/api/accounts/acct${accounts}`, admin, { enabled: false }));
    expectError(await chat(key, 'alpha', 'hi'), 401, /invalid API key/);
  });

  it("a user's old key is refused after POST /auth/api-key; the new one works; another user's key is untouched", async () => {
    const carolToken = await login('carol', 'carol-new-pass-2');
    const carolKey = ((await ok(await call('POST', '/auth/api-key', carolToken))).json() as { apiKey: string }).apiKey;
    const regenerated = ((await ok(await call('POST', '/auth/api-key', bob))).json() as { apiKey: string }).apiKey;
    expect(regenerated).not.toBe(BOB_KEY);
    expectError(await chat(BOB_KEY, 'alpha', 'hi'), 401, /invalid API key/);
    fake.script({ text: 'new key' }, { text: 'carol key' });
    expect(answer(await chat(regenerated, 'alpha', 'hi'))).toBe('new key');
    expect(answer(await chat(carolKey, 'alpha', 'hi'))).toBe('carol key');
    // Each user reads only their own key.
    expect((await ok(await call('GET', '/auth/api-key', carolToken))).json()).toEqual({ apiKey: carolKey });
  });

  it('a key of an api account bound to agent A chatting with agent B is 403; /models lists A only', async () => {
    const key = await freshKey('alpha');
    expectError(await chat(key, 'beta', 'hi'), 403, /is bound to "alpha", not to agent "beta"/);
    const models = (await ok(await call('GET', '/models', key))).json() as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toEqual(['alpha']);
    fake.script({ text: 'from alpha' });
    expect(answer(await chat(key, 'alpha', 'hi'))).toBe('from alpha');
  });

  it('an API key is refused on management routes (they need a JWT)', async () => {
    const key = await freshKey();
    expectError(await call('GET', '/agents', key), 401, /need a JWT, not an API key/);
    expectError(await call('GET', '/auth/api-key', key), 401);
  });
});

describe('function-level authorization (OWASP API5): a `user` may read but not write admin resources', { timeout: 20_000 }, () => {
  const writes: Array<[string, InjectOptions['method'], string, unknown]> = [
    ['configuration', 'PUT', '/config', { server: { port: 1234 } }],
    ['a model provider', 'POST', '/config/models/providers', { id: 'evil', base_url: 'http://169.254.169.254/v1', model: 'm' }],
    ['a provider key', 'PUT', '/config/models/providers/fake/api-key', { apiKey: 'sk-attacker-0123456789' }],
    ['the quick model setup', 'PUT', '/config/models', { model: 'm', api_key: 'sk-x', base_url: 'http://10.0.0.1/v1', default: true }],
    ['a channel account', 'POST', '/channels/api/accounts', { id: 'backdoor', name: 'backdoor' }],
    ['the bindings', 'PUT', '/bindings', { bindings: [] }],
    ['a global skill', 'POST', '/skills', { name: 'evil', description: 'x', content: 'x', scope: 'global' }],
    ['a global skill copy', 'POST', '/skills/copy', { name: 'evil', targetScope: 'global', agentId: 'alpha' }],
  ];
  it.each(writes)('writing %s is 403 and changes nothing', async (_what, method, url, body) => {
    const before = (await ok(await call('GET', '/config', admin))).body;
    expectError(await call(method, url, bob, body), 403, /only an admin may change/);
    expect((await ok(await call('GET', '/config', admin))).body).toBe(before);
    expect((await ok(await call('GET', '/channels/api', admin))).json().accounts).not.toHaveProperty('backdoor');
  });

  it('reading those resources is allowed, with secrets hidden', async () => {
    for (const url of ['/config', '/config/models/providers', '/channels', '/bindings', '/skills']) {
      const res = await ok(await call('GET', url, bob));
      expect(res.body).not.toMatch(/sk-[A-Za-z0-9_-]{20,}/);
    }
  });
});

describe('mass assignment (OWASP API3): read-only properties in bodies are refused or ignored, never applied', { timeout: 20_000 }, () => {
  it('a channel account cannot set hasSecret / has_secret, its id on update, or its key hash', async () => {
    expectError(await call('POST', '/channels/chat_a/accounts', admin, { id: 'ma1', app_id: 'a', hasSecret: true }), 400, /hasSecret/);
    expectError(await call('POST', '/channels/chat_a/accounts', admin, { id: 'ma1', app_id: 'a', has_secret: true }), 400, /has_secret.*read-only/);
    const created = (await ok(await call('POST', '/channels/chat_a/accounts', admin, { id: 'ma1', app_id: 'a' }), 201)).json();
    expect(created.hasSecret).toBe(false);
    expectError(await call('PUT', '/channels/chat_a/accounts/ma1', admin, { has_secret: true }), 400, /read-only/);
    expectError(await call('PUT', '/channels/chat_a/accounts/ma1', admin, { id: 'other' }), 400, /cannot change/);
    expectError(await call('PUT', '/channels/api/accounts/acct1', admin, { api_key_hash: 'x'.repeat(43) }), 400, /read-only/);
    expect((await ok(await call('GET', '/channels/chat_a/accounts/ma1', admin))).json()).toMatchObject({ id: 'ma1', hasSecret: false });
  });

  it('login and password change refuse a role, token version or hash sent along, and grant nothing', async () => {
    expectError(await call('POST', '/auth/login', undefined, { username: 'bob', password: PASSWORDS.bob, role: 'admin' }), 400, /unknown field "?role"?/);
    const token = await login('bob', PASSWORDS.bob);
    expectError(await call('PUT', '/config', token, { server: { port: 1 } }), 403, /only an admin/);
    expectError(
      await call('PUT', '/auth/password', token, { oldPassword: PASSWORDS.bob, newPassword: PASSWORDS.bob, role: 'admin', tokenVersion: 0, passwordHash: 'x' }),
      400,
      /unknown field/,
    );
    // Nothing of it was stored: the old token still works, bob is still a user, the password still opens the account.
    expectError(await call('PUT', '/config', token, { server: { port: 1 } }), 403, /only an admin/);
    bob = await login('bob', PASSWORDS.bob);
  });

  it('POST /auth/api-key ignores a key chosen by the caller', async () => {
    const chosen = 'sk-chosen-by-the-attacker-0123456789';
    const res = await ok(await call('POST', '/auth/api-key', bob, { apiKey: chosen }));
    bob = await login('bob', PASSWORDS.bob);
    expect((res.json() as { apiKey: string }).apiKey).not.toBe(chosen);
    expectError(await chat(chosen, 'alpha', 'hi'), 401, /invalid API key/);
  });

  it('PUT /config refuses users, secrets and limits (only its editable keys pass)', async () => {
    for (const security of [{ users: { bob: 'new-pass:sk-new' } }, { jwtSecret: 'x'.repeat(32) }, { rateLimit: { chat: { requests: 0 } } }]) {
      expectError(await call('PUT', '/config', admin, { security }), 400, /cannot be changed through this endpoint/);
    }
    expectError(await call('PUT', '/config', admin, { server: { cors_origins: ['*'] } }), 400, /cannot be changed/);
  });

  it('a provider body refuses fields it does not define (hasApiKey, createdAt) and stores nothing', async () => {
    expectError(
      await call('POST', '/config/models/providers', admin, { id: 'p2', base_url: 'https://api.example.com/v1', model: 'm', hasApiKey: true, createdAt: '2000-01-01' }),
      400,
      /unknown field "?(hasApiKey|createdAt)"?/,
    );
    const listed = (await ok(await call('GET', '/config/models/providers', admin))).json() as Array<{ id: string }>;
    expect(listed.find((p) => p.id === 'p2')).toBeUndefined();
  });

  it('an agent-private skill refuses a scope, agentId or createdAt from the body and stays with its agent', async () => {
    // Bob's own agent: only an owner (or an admin) writes an agent's skills.
    await ok(
      await call('POST', '/agents', bob, { ruleChain: { id: 'bob_skills', name: 'b' }, metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] } }),
      201,
    );
    for (const extra of [{ scope: 'global' }, { agentId: 'beta' }, { createdAt: '2000-01-01T00:00:00Z' }]) {
      expectError(await call('POST', '/agents/bob_skills/skills', bob, { name: 'mine', description: 'd', content: 'c', ...extra }), 400, new RegExp(`unknown field ${Object.keys(extra)[0]}`));
    }
    await ok(await call('POST', '/agents/bob_skills/skills', bob, { name: 'mine', description: 'd', content: 'c' }), 201);
    expect((await ok(await call('GET', '/agents/bob_skills/skills/mine', bob))).json()).toMatchObject({ name: 'mine', content: 'c' });
    expect((await call('GET', '/agents/beta/skills/mine', bob)).statusCode).toBe(403);
    expect((await call('GET', '/skills/mine?scope=global', bob)).statusCode).toBe(404);
  });

  it('a cron job refuses an id or a creation time from the body; the server makes its id', async () => {
    expectError(
      await call('POST', '/cron', bob, { name: 'j', schedule: '0 0 9 * * *', message: 'm', target: 'alpha', id: 'chosen-id', createdAt: '2000-01-01T00:00:00Z' }),
      400,
      /unknown field "?(id|createdAt)"?/,
    );
    expect((await call('GET', '/cron/chosen-id', bob)).statusCode).toBe(404);
    const job = await ok(await call('POST', '/cron', bob, { name: 'j', schedule: '0 0 9 * * *', message: 'm', target: 'alpha' }), 201);
    expect((job.json() as { id: string }).id).toMatch(/\S/);
  });

  it('an agent keeps its kind and creation time whatever ruleChain says', async () => {
    await ok(
      await call('POST', '/agents', bob, {
        ruleChain: { id: 'ma_agent', name: 'x', createdAt: '2000-01-01T00:00:00Z', kind: 'rule', agentId: 'alpha' },
        metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] },
      }),
      201,
    );
    const row = await runtime.db.db.selectFrom('rule_chains').select(['kind', 'agent_id', 'created_at']).where('id', '=', 'ma_agent').executeTakeFirstOrThrow();
    expect(row.kind).toBe('agent');
    expect(row.agent_id).toBeNull();
    expect(new Date(row.created_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });
});

describe('SSRF through agent tools (OWASP API7): private targets are refused unless configuration allows them', { timeout: 20_000 }, () => {
  /** What each private target is called, its URL (the target server's port is known once it listens), and the refusal. */
  const TARGETS: Array<[string, (port: number) => string, RegExp]> = [
    ['127.0.0.1', (port) => `http://127.0.0.1:${port}/`, /127\.0\.0\.1 is a loopback address/],
    ['the cloud metadata address', () => 'http://169.254.169.254/', /169\.254\.169\.254 is a link-local address/],
    ['10/8', () => 'http://10.0.0.1/', /10\.0\.0\.1 is a private \(10\/8\) address/],
    ['IPv6 loopback', (port) => `http://[::1]:${port}/`, /::1 is a loopback address/],
    ['a name resolving to loopback', (port) => `http://localhost:${port}/`, /"localhost" resolves to .*loopback/],
    ['loopback written as a decimal number', (port) => `http://2130706433:${port}/`, /127\.0\.0\.1 is a loopback address/],
    ['metadata as an IPv4-mapped IPv6 address', () => 'http://[::ffff:169.254.169.254]/', /IPv4-mapped link-local/],
  ];

  for (const [index, [what, url, reason]] of TARGETS.entries()) {
    it(`http_fetch to ${what} is refused`, async () => {
      hits.length = 0;
      scriptToolCall('http_fetch', { url: `${url(targetPort)}latest/meta-data/` });
      const text = answer(await chat(await freshKey(), 'fetcher', 'fetch it'));
      expect(text).toMatch(/^Error: http_fetch refused: /);
      expect(text).toMatch(reason);
      expect(hits).toEqual([]);
    });

    it(`restApiCall to ${what} is refused`, async () => {
      hits.length = 0;
      scriptToolCall('call_api', { url: `${url(targetPort)}latest/meta-data/` });
      // A node failure ends the chain on Failure with the error (as RuleGo), in the tool's result.
      const result = JSON.parse(answer(await chat(await freshKey(), 'caller', 'call it'))) as { relation: string; error: string };
      expect(result.relation).toBe('Failure');
      expect(result.error).toMatch(reason);
      expect(hits).toEqual([]);
    });

    it(`an MCP server on ${what} is not connected`, async () => {
      hits.length = 0;
      const id = `mcp_${index}`;
      await createAgent(id, { tools: [{ type: 'mcp', name: 'internal', config: { url: `${url(targetPort)}mcp` } }] });
      fake.script((req: FakeRequest) => ({ text: `tools: ${JSON.stringify((req.body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name))}` }));
      expect(answer(await chat(await freshKey(), id, 'what can you do'))).toBe('tools: []');
      expect(hits).toEqual([]);
    });
  }

  it('http_fetch following a redirect to the metadata address is refused', async () => {
    hits.length = 0;
    scriptToolCall('http_fetch', { url: `http://127.0.0.1:${targetPort}/to-metadata` });
    const text = answer(await chat(await freshKey(), 'fetcher_open', 'fetch it'));
    expect(text).toMatch(/^Error: http_fetch refused: 169\.254\.169\.254 is a link-local address/);
    expect(hits).toEqual(['GET /to-metadata']);
  });

  it('allowed by configuration (allowHosts), http_fetch, restApiCall and MCP reach the private host', async () => {
    hits.length = 0;
    scriptToolCall('http_fetch', { url: `http://127.0.0.1:${targetPort}/data` });
    expect(answer(await chat(await freshKey(), 'fetcher_open', 'fetch'))).toMatch(/internal-data/);
    scriptToolCall('call_open', { url: `http://127.0.0.1:${targetPort}/data` });
    expect(JSON.parse(answer(await chat(await freshKey(), 'caller', 'call')))).toMatchObject({ relation: 'Success', data: 'internal-data' });
    await createAgent('mcp_open', { tools: [{ type: 'mcp', name: 'internal', config: { url: `http://127.0.0.1:${targetPort}/mcp`, allowHosts: ['127.0.0.1'] } }] });
    scriptToolCall('internal__secrets', {});
    expect(answer(await chat(await freshKey(), 'mcp_open', 'read'))).toBe('internal-secret');
    expect(hits).toEqual(expect.arrayContaining(['GET /data', 'POST /mcp']));
  });

  it('only an admin may open private networks: a `user` setting allowHosts or allowPrivateNetworks anywhere is 403', async () => {
    const agentBody = (id: string, tools: unknown[]) => ({
      ruleChain: { id, name: id },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', tools } }], connections: [] },
    });
    const opened: Array<[string, InjectOptions['method'], string, unknown]> = [
      ['an http_fetch allowHosts', 'POST', '/agents', agentBody('bob_fetch', [{ type: 'builtin', name: 'http_fetch', config: { allowHosts: ['127.0.0.1'] } }])],
      ['an MCP allowPrivateNetworks', 'POST', '/agents', agentBody('bob_mcp', [{ type: 'mcp', name: 'm', config: { url: 'http://10.0.0.1/mcp', allowPrivateNetworks: true } }])],
      ['an existing agent opened by update', 'PUT', '/agents/bob_closed', agentBody('bob_closed', [{ type: 'builtin', name: 'http_fetch', config: { allowPrivateNetworks: true } }])],
      ['a sandboxed bash given the network', 'POST', '/agents', agentBody('bob_bash', [{ type: 'builtin', name: 'bash', config: { allowNetwork: true } }])],
      [
        'a restApiCall node',
        'POST',
        '/rules',
        { ruleChain: { id: 'bob_rest', name: 'r' }, metadata: { nodes: [{ id: 'c', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'http://169.254.169.254/', allowHosts: ['169.254.169.254'] } }], connections: [] } },
      ],
    ];
    await ok(await call('POST', '/agents', bob, agentBody('bob_closed', [{ type: 'builtin', name: 'http_fetch' }])), 201);
    for (const [what, method, url, body] of opened) {
      expectError(await call(method, url, bob, body), 403, /(allow(Hosts|PrivateNetworks|Network)|the bash tool) .*, so only an admin's definition may use it; this definition belongs to "bob", who is not an admin/);
      expect(what).toBeTruthy();
    }
    for (const id of ['bob_fetch', 'bob_mcp', 'bob_bash']) expectError(await call('GET', `/agents/${id}`, admin), 404);
    expectError(await call('GET', '/rules/bob_rest', admin), 404);
    expect(JSON.stringify((await ok(await call('GET', '/agents/bob_closed', admin))).json())).not.toMatch(/allowPrivateNetworks/);
    // The same user may still write agents that keep the policy closed; an admin may open it.
    await ok(await call('POST', '/agents', bob, agentBody('bob_plain', [{ type: 'builtin', name: 'http_fetch', config: { allowHosts: [] } }])), 201);
    await ok(await call('POST', '/agents', admin, agentBody('admin_open', [{ type: 'builtin', name: 'http_fetch', config: { allowPrivateNetworks: true } }])), 201);
  });
});

describe('archives (Zip Slip, symlinks, zip bombs): a hostile skill upload is refused whole, nothing written', { timeout: 20_000 }, () => {
  const upload = async (agent: string, zip: Buffer) => {
    const body = multipart([{ name: 'file', value: zip, filename: 'skills.zip' }]);
    return app.inject({ method: 'POST', url: `/api/v1/agents/${agent}/skills/upload`, headers: { ...auth(admin), ...body.headers }, payload: body.payload });
  };
  const good = { name: 'good/SKILL.md', data: Buffer.from('# Good\nfine') };
  let n = 0;
  const hostile: Array<[string, number, RegExp, () => Promise<Buffer>]> = [
    ['a "../" entry', 400, /"\.\.\/evil\/SKILL\.md" leaves the archive root/, async () => rawZip([good, { name: '../evil/SKILL.md', data: Buffer.from('x') }])],
    ['an absolute entry', 400, /"\/tmp\/evil\/SKILL\.md" is an absolute path/, async () => rawZip([good, { name: '/tmp/evil/SKILL.md', data: Buffer.from('x') }])],
    ['a backslash entry', 400, /contains a backslash/, async () => rawZip([good, { name: '..\\evil\\SKILL.md', data: Buffer.from('x') }])],
    ['a drive-letter entry', 400, /"C:\/evil\/SKILL\.md" names a drive/, async () => rawZip([good, { name: 'C:/evil/SKILL.md', data: Buffer.from('x') }])],
    ['a "../" hidden in the middle of a path', 400, /leaves the archive root/, async () => rawZip([good, { name: 'a/../../evil.md', data: Buffer.from('x') }])],
    ['a NUL byte in an entry name', 400, /contains a NUL byte/, async () => rawZip([good, { name: 'evil.md\u0000.txt', data: Buffer.from('x') }])],
    ['a bidirectional override in an entry name', 400, /contains U\+202E/, async () => rawZip([good, { name: 'evil\u202Edm/SKILL.md', data: Buffer.from('x') }])],
    ['a symlink entry (unix mode 0120000)', 400, /is a symbolic link/, async () => rawZip([good, { name: 'link/SKILL.md', data: Buffer.from('/etc/passwd'), unixMode: 0o120777 }])],
    ['too many entries', 413, /at most 1000 are accepted/, async () => rawZip(Array.from({ length: 1001 }, (_, i) => ({ name: `s${i}.md`, data: Buffer.from('x') })))],
    ['entries declaring more than 200 MB', 413, /at most 209715200 are accepted/, async () => rawZip([good, { name: 'big.bin', data: Buffer.from('x'), size: 250 * 1024 * 1024 }])],
    [
      'an entry lying about its size (declares 1 KB, inflates to 8 MB)',
      400,
      /"bomb\/SKILL\.md" expands beyond its declared 1024 bytes/,
      async () => rawZip([good, { name: 'bomb/SKILL.md', data: await deflatedZeros(8 * 1024 * 1024), method: 8, size: 1024 }]),
    ],
  ];
  it.each(hostile)('%s is refused (%i)', async (_what, status, message, build) => {
    const agent = `zip${++n}`;
    await createAgent(agent);
    expectError(await upload(agent, await build()), status, message);
    expect((await ok(await call('GET', `/agents/${agent}/skills`, admin))).json().total).toBe(0);
  });

  it('a high-ratio entry that tells the truth is skipped without being inflated', async () => {
    const agent = `zip${++n}`;
    await createAgent(agent);
    const bomb = { name: 'bomb/SKILL.md', data: await deflatedZeros(16 * 1024 * 1024), method: 8 as const, size: 16 * 1024 * 1024, crc: 0 };
    const res = await ok(await upload(agent, rawZip([good, bomb])));
    expect(res.json()).toMatchObject({ skipped: [{ entry: 'bomb/SKILL.md', reason: expect.stringMatching(/larger than 1048576 bytes/) }] });
    const names = ((await ok(await call('GET', `/agents/${agent}/skills`, admin))).json() as { data: Array<{ name: string }> }).data.map((s) => s.name);
    expect(names).toEqual(['good']);
  });
});

describe("workspace traversal: no route and no agent tool leaves the agent's workspace", { timeout: 20_000 }, () => {
  const forms: Array<[string, string]> = [
    ['..', '..'],
    ['../ into another agent', '../beta/AGENTS.md'],
    ['a nested ..', 'a/../../beta/AGENTS.md'],
    ['an absolute path', '/../etc/passwd'],
    ['a backslash', '..\\beta\\AGENTS.md'],
    ['a NUL byte', 'AGENTS.md\u0000.txt'],
  ];
  const q = (p: string) => `path=${encodeURIComponent(p)}`;

  it.each(forms)('%s is refused (400) by every workspace route, in the query and in bodies', async (_what, p) => {
    const ws = '/agents/alpha/workspace';
    const calls: Array<[string, () => Promise<LightMyRequestResponse>]> = [
      ['entries', () => call('GET', `${ws}/entries?${q(p)}`, admin)],
      ['file', () => call('GET', `${ws}/file?${q(p)}`, admin)],
      ['download', () => call('GET', `${ws}/download?${q(p)}`, admin)],
      ['put file', () => call('PUT', `${ws}/file?${q(p)}`, admin, { content: 'x' })],
      ['post files', () => call('POST', `${ws}/files`, admin, { path: p, content: 'x' })],
      ['post dirs', () => call('POST', `${ws}/dirs`, admin, { path: p })],
      ['delete', () => call('DELETE', `${ws}/entry?${q(p)}`, admin)],
      ['rename from', () => call('PATCH', `${ws}/rename?${q(p)}`, admin, { newName: 'x' })],
      ['rename to', () => call('PATCH', `${ws}/rename?${q('AGENTS.md')}`, admin, { newName: p })],
    ];
    for (const [what, run] of calls) {
      const res = await run();
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expect(res.json(), what).toEqual({ error: expect.stringMatching(/^Invalid input: /) });
    }
    expect((await ok(await call('GET', '/agents/beta/workspace/entries', admin))).json().map((e: { name: string }) => e.name)).toEqual(['AGENTS.md']);
  });

  it('percent-encoded and doubly encoded dot segments in the raw URL do not escape either', async () => {
    const raw = (query: string) => app.inject({ method: 'GET', url: `/api/v1/agents/alpha/workspace/file?${query}`, headers: auth(admin) });
    expectError(await raw('path=%2e%2e%2fbeta%2fAGENTS.md'), 400);
    expectError(await raw('path=..%5cbeta%5cAGENTS.md'), 400);
    // Decoded once by the server, %252e%252e is the literal name "%2e%2e": a missing file, not a way out.
    expectError(await raw('path=%252e%252e%252fbeta%252fAGENTS.md'), 404);
    // A leading slash names the workspace root, never the host's file system.
    expectError(await raw('path=%2Fetc%2Fpasswd'), 404, /workspace file "etc\/passwd"/);
  });

  it("the agent's own write and read tools refuse paths outside its workspace", async () => {
    scriptToolCall('write', { path: '../beta/AGENTS.md', content: 'owned' });
    expect(answer(await chat(await freshKey(), 'writer', 'write'))).toMatch(/^Error: /);
    scriptToolCall('read', { path: '/etc/passwd' });
    const read = answer(await chat(await freshKey(), 'writer', 'read'));
    expect(read).not.toMatch(/root:/);
    const beta = (await ok(await call('GET', `/agents/beta/workspace/file?${q('AGENTS.md')}`, admin))).json() as { content: string };
    expect(beta.content).not.toBe('owned');
  });
});

describe('resource limits (OWASP API4): bodies over the limits are 413 {error}', { timeout: 20_000 }, () => {
  it('a JSON body over server.body_limit is 413 on management and chat routes', async () => {
    const big = 'x'.repeat(BODY_LIMIT + 1);
    expectError(await call('POST', '/agents', admin, { ruleChain: { id: 'big', name: big }, metadata: { nodes: [], connections: [] } }), 413, /^Request body too large/);
    expectError(await chat(await freshKey(), 'alpha', big), 413, /^Request body too large/);
  });

  it('a workspace file over workspace.max_file_bytes is 413 and not written, by route or by tool', async () => {
    const big = 'y'.repeat(MAX_FILE + 1);
    expectError(await call('POST', '/agents/alpha/workspace/files', admin, { path: 'big.txt', content: big }), 413, new RegExp(`limited to ${MAX_FILE} bytes`));
    expectError(await call('PUT', '/agents/alpha/workspace/file?path=big.txt', admin, { content: big }), 413);
    scriptToolCall('write', { path: 'big.txt', content: big });
    expect(answer(await chat(await freshKey(), 'writer', 'write big'))).toMatch(/^Error: /);
    for (const agent of ['alpha', 'writer']) expect((await call('GET', `/agents/${agent}/workspace/file?path=big.txt`, admin)).statusCode).toBe(404);
  });
});

describe('per-credential chat rate limit: 429 {error} with Retry-After', { timeout: 20_000 }, () => {
  it('a key over its budget gets 429 with Retry-After in seconds; other keys are not affected', async () => {
    const key = await freshKey();
    for (let i = 0; i < CHAT_LIMIT; i++) {
      fake.script({ text: `answer ${i}` });
      expect(answer(await chat(key, 'alpha', `q${i}`))).toBe(`answer ${i}`);
    }
    const before = fake.requests.length;
    const limited = await chat(key, 'alpha', 'one more');
    expectError(limited, 429, /^Too many requests: this credential sent more than 3 chat requests in 3600 s; try again in \d+ s$/);
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3600 / CHAT_LIMIT);
    expect(fake.requests.length).toBe(before);
    fake.script({ text: 'another key' });
    expect(answer(await chat(await freshKey(), 'alpha', 'hi'))).toBe('another key');
  });

  it("a user's JWT and the user's API key spend one budget", async () => {
    const token = await login('carol', 'carol-new-pass-2');
    const key = ((await ok(await call('POST', '/auth/api-key', token))).json() as { apiKey: string }).apiKey;
    // carol chatted once with a key earlier in this file; one more each way, then the budget is gone.
    const spent = [await chat(token, 'ghost', 'x'), await chat(key, 'ghost', 'x')].map((r) => r.statusCode);
    expect(spent).toEqual([404, 404]);
    expectError(await chat(token, 'ghost', 'x'), 429);
    expectError(await chat(key, 'ghost', 'x'), 429);
  });
});

describe('security headers and CORS', { timeout: 20_000 }, () => {
  const ui = (url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers });

  it('the UI page and its assets carry CSP (default-src self, frame-ancestors none), nosniff and a referrer policy', async () => {
    for (const url of ['/', '/assets/app-1a2b.js', '/agents/alpha']) {
      const res = await ui(url);
      expect(res.statusCode, url).toBe(200);
      const csp = String(res.headers['content-security-policy']);
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
    }
  });

  it('API answers are nosniff and framing-proof too (a workspace file never renders as a page of this origin)', async () => {
    await ok(await call('POST', '/agents/alpha/workspace/files', admin, { path: 'evil.html', content: '<script>alert(document.domain)</script>' }), 201);
    const res = await call('GET', '/agents/alpha/workspace/download?path=evil.html', admin);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-disposition']).toMatch(/^attachment;/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(String(res.headers['content-security-policy'])).toMatch(/default-src 'none'.*sandbox|sandbox.*default-src 'none'/);
    const json = await call('GET', '/agents', admin);
    expect(json.headers['x-content-type-options']).toBe('nosniff');
    expect(String(json.headers['content-security-policy'])).toContain("frame-ancestors 'none'");
  });

  it('by default no other origin may read answers: no Access-Control-Allow-Origin, preflights refused', async () => {
    const evil = { origin: 'https://evil.example' };
    const get = await call('GET', '/agents', admin, undefined, evil);
    expect(get.statusCode).toBe(200);
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
    const chatRes = await chat(await freshKey(), 'ghost', 'x', evil);
    expect(chatRes.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/v1/chat/completions',
      headers: { ...evil, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(preflight.statusCode).toBeGreaterThanOrEqual(400);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.headers['access-control-allow-methods']).toBeUndefined();
    expect(preflight.headers['access-control-allow-headers']).toBeUndefined();
  });
});

describe('CORS opened by server.cors_origins', { timeout: 20_000 }, () => {
  let open: Runtime;
  let openApp: FastifyInstance;
  beforeAll(async () => {
    open = await newRuntime('cors', 'server: {host: 127.0.0.1, cors_origins: ["https://app.example.com"]}\n');
    await seedGateway(open);
    openApp = await buildGateway(open);
    await openApp.ready();
  }, 30_000);
  afterAll(async () => {
    await openApp?.close();
    await open?.lifecycle.shutdown('test');
  });

  it('a listed origin gets its preflight answered and may read answers; any other origin may not', async () => {
    const preflight = (origin: string) =>
      openApp.inject({
        method: 'OPTIONS',
        url: '/api/v1/agents',
        headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization,content-type' },
      });
    const allowed = await preflight('https://app.example.com');
    expect(allowed.statusCode).toBe(204);
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(String(allowed.headers['access-control-allow-methods'])).toContain('PUT');
    expect(allowed.headers['access-control-allow-headers']).toBe('authorization,content-type');
    expect(allowed.headers['access-control-allow-credentials']).toBeUndefined();
    const read = await openApp.inject({ method: 'GET', url: '/api/v1/agents', headers: { origin: 'https://app.example.com' } });
    expect(read.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(String(read.headers.vary)).toMatch(/origin/i);

    for (const origin of ['https://evil.example', 'https://app.example.com.evil.example', 'http://app.example.com']) {
      const refused = await preflight(origin);
      expect(refused.statusCode, origin).toBeGreaterThanOrEqual(400);
      expect(refused.headers['access-control-allow-origin'], origin).toBeUndefined();
      const other = await openApp.inject({ method: 'GET', url: '/api/v1/agents', headers: { origin } });
      expect(other.headers['access-control-allow-origin'], origin).toBeUndefined();
    }
  });
});

describeWithRedis('per-credential chat rate limit across gateway replicas (cluster: one budget in Redis)', () => {
  const prefix = uniqueRedisPrefix();
  const KEY = 'sk-replicated-account-key-0123456789';
  const ANN_PASSWORD = 'ann-password-0123456789';
  const replicas: Array<{ runtime: Runtime; app: FastifyInstance }> = [];
  beforeAll(async () => {
    const yaml = [
      'server: {host: 127.0.0.1}',
      `security: {rateLimit: {chat: {requests: 4, windowSeconds: 3600}}, users: {ann: "${ANN_PASSWORD}"}}`,
      `channels: {api: {accounts: {shared: {api_key: "${KEY}"}}}}`,
    ].join('\n');
    for (const name of ['replica-a', 'replica-b']) {
      const rt = await newRuntime(name, yaml, (logger) => createRedisBus({ url: redisUrl(), prefix, logger }));
      await seedGateway(rt);
      const gw = await buildGateway(rt);
      await gw.ready();
      replicas.push({ runtime: rt, app: gw });
    }
  }, 60_000);
  afterAll(async () => {
    for (const r of replicas) {
      await r.app.close();
      await r.runtime.lifecycle.shutdown('test');
    }
    await cleanupRedisPrefix(redisUrl(), prefix);
  });

  it('requests spread over two gateways spend one budget; the fifth is 429 on either', { timeout: 20_000 }, async () => {
    const send = (i: number) =>
      replicas[i % 2]!.app.inject({ method: 'POST', url: '/api/v1/chat/completions', headers: auth(KEY), payload: { model: 'ghost', messages: [{ role: 'user', content: 'x' }] } });
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push((await send(i)).statusCode);
    expect(codes).toEqual([404, 404, 404, 404]);
    for (const i of [4, 5]) {
      const res = await send(i);
      expectError(res, 429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
  });

  it('failed logins of one (username, address) are counted once over both gateways and refuse that pair; a success clears them', { timeout: 20_000 }, async () => {
    const login = (i: number, password: string, remoteAddress = '10.77.0.1') =>
      replicas[i % 2]!.app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress, payload: { username: 'ann', password } });
    for (let i = 0; i < 5; i++) expect((await login(i, 'wrong-password')).statusCode).toBe(401);
    expect((await login(1, ANN_PASSWORD)).statusCode).toBe(200);
    const codes: number[] = [];
    for (let i = 0; i < 10; i++) codes.push((await login(i, 'wrong-password')).statusCode);
    expect(codes).toEqual(Array(10).fill(401));
    // Per replica each has seen at most 8 failures since its last success; the shared count says 10.
    for (const i of [0, 1]) {
      const res = await login(i, ANN_PASSWORD);
      expectError(res, 429, /too many login attempts/);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    // Issue 20, finding 7: the same name from an address that has not been failing still logs in.
    for (const i of [0, 1]) expect((await login(i, ANN_PASSWORD, `10.77.1.${i}`)).statusCode).toBe(200);
  });

  it('failed logins for a username from many addresses never lock its owner out on any gateway', { timeout: 30_000 }, async () => {
    let n = 0;
    const login = (i: number, password: string) =>
      replicas[i % 2]!.app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress: `10.78.0.${++n}`, payload: { username: 'ann', password } });
    for (let i = 0; i < 12; i++) expect((await login(i, 'wrong-password')).statusCode).toBe(401);
    for (const i of [0, 1]) expect((await login(i, ANN_PASSWORD)).statusCode).toBe(200);
  });
});
