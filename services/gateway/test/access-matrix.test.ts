import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { createRedisBus } from '@agentry/bus/redis';
import { PubSubChannels, QueueNames } from '@agentry/contracts';
import { ensureSession, insertRun, type DbHandle } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { cleanupRedisPrefix, createTestDatabase, createTestPglite, describeWithServers, redisUrl, uniqueRedisPrefix, type TestDatabase } from '@agentry/testing';
import { buildGateway, seedGateway, type Access } from '@agentry/gateway';
import type { RouteAccess } from '../src/auth/auth.js';
import { agentDsl, ruleDsl } from './resources-harness.js';

/**
 * The authorization matrix, generated from the gateway's own route table (`app.routeAccess`,
 * filled as routes are registered): every route x every kind of caller x every spelling of its
 * path -> the status its declared access implies. A route added tomorrow is in the table (or
 * the gateway refuses to start without a declaration), so it cannot slip past this test.
 */

const JWT_SECRET = 'matrix-jwt-secret-0123456789-abcdef';
const PASSWORDS = { admin: 'admin-pass-1234', alice: 'alice-pass-1234', bob: 'bob-pass-1234', kim: 'kim-pass-1234' };
const KIM_KEY = 'sk-kim-user-key-0123456789abcdef';
const ACCOUNT_KEY = 'sk-matrix-account-key-0123456789';
const DISABLED_ACCOUNT_KEY = 'sk-matrix-disabled-key-0123456789';

const CONFIG = `
security:
  requireAuth: true
  jwtSecret: ${JWT_SECRET}
  users:
    admin: "${PASSWORDS.admin}"
    alice: "${PASSWORDS.alice}"
    bob: "${PASSWORDS.bob}"
    kim: "${PASSWORDS.kim}:${KIM_KEY}"
  rateLimit:
    chat: {requests: 0}
channels:
  api:
    enabled: true
    accounts:
      app: {name: App, enabled: true, api_key: ${ACCOUNT_KEY}}
      off: {name: Off, enabled: false, api_key: ${DISABLED_ACCOUNT_KEY}}
models:
  default_provider: p1
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-provider-secret, models: [{name: m1, alias: default}]}
`;

type Caller = 'anonymous' | 'accountKey' | 'disabledAccountKey' | 'userKey' | 'ownerJwt' | 'otherUserJwt' | 'adminJwt' | 'expiredJwt' | 'forgedJwt';
const CALLERS: readonly Caller[] = ['anonymous', 'accountKey', 'disabledAccountKey', 'userKey', 'otherUserJwt', 'expiredJwt', 'forgedJwt', 'ownerJwt', 'adminJwt'];

/** 'pass': the guard lets the call through (the handler may still answer 2xx, 400, 404, 409...). */
type Expected = 401 | 403 | 'pass';

const JWT_CALLER: Partial<Record<Caller, true>> = { ownerJwt: true, otherUserJwt: true, adminJwt: true };

/** What a route's declared access means for each caller, with security.requireAuth on. */
export function expected(access: Access, caller: Caller): Expected {
  if (access === 'public') return 'pass';
  if (caller === 'anonymous' || caller === 'disabledAccountKey' || caller === 'expiredJwt' || caller === 'forgedJwt') return 401;
  if (access === 'chat') return 'pass';
  // Management routes take a JWT only: API keys are for chat.
  if (!JWT_CALLER[caller]) return 401;
  if (access === 'self' || access === 'user') return 'pass';
  if (access === 'owner') return caller === 'otherUserJwt' ? 403 : 'pass';
  return caller === 'adminJwt' ? 'pass' : 403;
}

/** Spellings of one path that a router may or may not fold into it; none may get past the guard. */
export function spellings(url: string): Array<[string, string]> {
  const [pathPart, query = ''] = url.split('?');
  const q = query ? `?${query}` : '';
  const segments = pathPart!.split('/').slice(1);
  const encodeFirst = (s: string, enc: (c: string) => string) => (s.length > 0 ? enc(s[0]!) + s.slice(1) : s);
  const hex = (c: string) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  const join = (segs: string[]) => `/${segs.join('/')}`;
  return [
    ['percent-encoded letters', join(segments.map((s) => encodeFirst(s, hex))) + q],
    ['%2F for a slash', `/${segments[0]}%2F${segments.slice(1).join('/')}${q}`],
    ['%25 double encoding', join(segments.map((s) => encodeFirst(s, (c) => `%25${c.charCodeAt(0).toString(16)}`))) + q],
    ['doubled slashes', `/${segments.join('//')}${q}`],
    ['leading double slash', `/${pathPart}${q}`],
    ['dot segment', `/${segments[0]}/./${segments.slice(1).join('/')}${q}`],
    ['dot-dot segment', `/${segments[0]}/x/../${segments.slice(1).join('/')}${q}`],
    ['trailing slash', `${pathPart}/${q}`],
    [';params', `/${segments[0]};x=1/${segments.slice(1).join('/')}${q}`],
    ['upper case', pathPart!.toUpperCase() + q],
  ];
}

interface World {
  app: FastifyInstance;
  runtime: Runtime;
  tokens: Record<'admin' | 'alice' | 'bob', string>;
  expiredJwt: string;
  forgedJwt: string;
}

function headersOf(w: World, caller: Caller): Record<string, string> {
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  switch (caller) {
    case 'anonymous':
      return {};
    case 'accountKey':
      return bearer(ACCOUNT_KEY);
    case 'disabledAccountKey':
      return bearer(DISABLED_ACCOUNT_KEY);
    case 'userKey':
      return bearer(KIM_KEY);
    case 'ownerJwt':
      return bearer(w.tokens.alice);
    case 'otherUserJwt':
      return bearer(w.tokens.bob);
    case 'adminJwt':
      return bearer(w.tokens.admin);
    case 'expiredJwt':
      return bearer(w.expiredJwt);
    case 'forgedJwt':
      return bearer(w.forgedJwt);
  }
}

async function ok(res: LightMyRequestResponse, what: string): Promise<LightMyRequestResponse> {
  if (res.statusCode >= 300) throw new Error(`fixture ${what}: ${res.statusCode} ${res.body}`);
  return res;
}

/**
 * Fresh rows for one route, owned by alice (the "owner" caller) or made by admin: every route
 * gets its own, so a DELETE earlier in the walk never leaves a later route without its row.
 */
async function fixturesFor(w: World, route: RouteAccess, n: number): Promise<Record<string, string>> {
  const as = (who: 'admin' | 'alice', method: InjectOptions['method'], url: string, payload?: unknown) =>
    w.app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${w.tokens[who]}` }, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const params: Record<string, string> = { platform: 'chat_a', '*': 'x' };
  const url = route.url;
  if (url.includes(':agentId') || url.includes(':runId') || url.includes('/cron/:id') || url.includes('/sessions/:id') || url.endsWith('/models/:id')) {
    params.agentId = `mx_agent_${n}`;
    await ok(await as('alice', 'POST', '/agents', agentDsl(params.agentId)), 'agent');
  }
  if (url.includes(':runId')) {
    params.runId = `mx_run_${n}`;
    await insertRun(w.runtime.db.db, { id: params.runId, agentId: params.agentId!, sessionId: null, source: 'api', request: { messages: [] } });
  }
  if (url.includes('/skills/:name') && url.includes(':agentId')) {
    params.name = 'notes';
    await ok(await as('alice', 'POST', `/agents/${params.agentId}/skills`, { name: 'notes', description: 'd', content: 'c' }), 'agent skill');
  } else if (url.includes('/skills/:name')) {
    params.name = `mx_skill_${n}`;
    await ok(await as('admin', 'POST', '/skills', { name: params.name, description: 'd', content: 'c', scope: 'global' }), 'global skill');
  }
  if (url.includes('/providers/:name')) {
    params.name = `mxp${n}`;
    await ok(await as('admin', 'POST', '/config/models/providers', { id: params.name, name: params.name, base_url: 'http://127.0.0.1:1/v1', models: [{ name: 'm' }] }), 'provider');
  }
  if (url.includes('/users/:name')) {
    params.name = `mx_user_${n}`;
    await ok(await as('admin', 'POST', '/users', { username: params.name, password: 'mx-pass-word-1', role: 'user' }), 'user');
  }
  if (url.includes(':accountId')) {
    params.accountId = `mxacc${n}`;
    await ok(await as('admin', 'POST', '/channels/chat_a/accounts', { id: params.accountId, name: 'A', enabled: true, app_id: 'app', app_secret: 'secret' }), 'account');
  }
  if (/^\/api\/v1\/rules\/:id/.test(url)) {
    params.id = `mx_rule_${n}`;
    await ok(await as('alice', 'POST', '/rules', ruleDsl(params.id)), 'rule');
  } else if (url.includes('/rules/:id')) {
    params.id = `mx_arule_${n}`;
    await ok(await as('alice', 'POST', `/agents/${params.agentId}/rules`, ruleDsl(params.id)), 'agent rule');
  } else if (url.includes('/cron/:id')) {
    const res = await ok(await as('alice', 'POST', '/cron', { name: 'c', schedule: '0 0 3 * * *', message: 'm', target: params.agentId }), 'cron job');
    params.id = (res.json() as { id: string }).id;
  } else if (url.includes('/responses/:id')) {
    // An id of the right shape that names no response: the handler's 404 is past the guard.
    params.id = `resp_${n.toString(16).padStart(32, '0')}`;
  } else if (url.endsWith('/models/:id')) {
    params.id = params.agentId!;
  } else if (url.includes('/sessions/:id')) {
    params.id = (await ensureSession(w.runtime.db.db, { agentId: params.agentId!, sessionKey: `s${n}`, owner: 'user:alice' })).id;
  }
  return params;
}

function concrete(route: RouteAccess, params: Record<string, string>): string {
  const filled = route.url.replace(/:([A-Za-z]+)/g, (_m, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`no fixture for :${name} in ${route.url}`);
    return encodeURIComponent(v);
  });
  const withStar = filled.replace(/\*$/, params['*']!);
  return withStar.includes('/workspace/') ? `${withStar}?path=AGENTS.md` : withStar;
}

function call(w: World, method: string, url: string, caller: Caller): Promise<LightMyRequestResponse> {
  const body = method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS' ? {} : { payload: {} };
  return w.app.inject({ method: method as InjectOptions['method'], url, headers: headersOf(w, caller), ...body });
}

function check(res: LightMyRequestResponse, want: Expected, label: string): void {
  expect(res.statusCode, `${label}: ${res.body.slice(0, 200)}`).toBeLessThan(500);
  if (want === 'pass') expect([401, 403], `${label}: ${res.body.slice(0, 200)}`).not.toContain(res.statusCode);
  else expect(res.statusCode, `${label}: ${res.body.slice(0, 200)}`).toBe(want);
  expect(res.headers['content-type'] === undefined || res.statusCode < 400 || String(res.headers['content-type']).includes('json'), label).toBe(true);
}

/** The runtime of CONFIG (written into `cwd`) on the given storage and bus. */
function matrixRuntime(cwd: string, openDb: () => Promise<DbHandle>, openBus: (logger: Parameters<typeof createMemoryBus>[0]['logger']) => Bus): Promise<Runtime> {
  return bootstrap({
    service: 'gateway-matrix',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'matrix-master-key-0123456789-abcdefgh' },
    cwd,
    logDestination: { write: () => {} },
    openDb,
    openBus,
  });
}

function matrix(open: () => Promise<{ db: () => Promise<DbHandle>; bus: (logger: Parameters<typeof createMemoryBus>[0]['logger']) => Bus; close(): Promise<void> }>) {
  let w: World;
  let cwd = '';
  let closeBackends: () => Promise<void> = async () => {};

  beforeAll(async () => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-matrix-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), CONFIG);
    const backends = await open();
    closeBackends = backends.close;
    const runtime = await matrixRuntime(cwd, backends.db, backends.bus);
    // A stand-in for the agent worker, which this gateway-only world has none of: a forced
    // compaction the guard lets through is answered at once (without one it would wait out
    // worker.max_run_ms). Other jobs are left alone: no route here runs an agent.
    runtime.bus.queue.consume(
      QueueNames.agentRun,
      async (job) => {
        if (job.data.type === 'session-compact') await runtime.bus.pubsub.publish(PubSubChannels.compaction(job.data.requestId), { ok: true, compacted: 0, summary: null });
      },
      { concurrency: 2 },
    );
    await seedGateway(runtime);
    const app = await buildGateway(runtime);
    await app.ready();
    runtime.health.markStarted();
    const login = async (username: keyof typeof PASSWORDS) => {
      const res = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password: PASSWORDS[username] } });
      if (res.statusCode !== 200) throw new Error(`login ${username}: ${res.statusCode} ${res.body}`);
      return (res.json() as { token: string }).token;
    };
    const key = new TextEncoder().encode(JWT_SECRET);
    const now = Math.floor(Date.now() / 1000);
    w = {
      app,
      runtime,
      tokens: { admin: await login('admin'), alice: await login('alice'), bob: await login('bob') },
      // Signed with the real secret, but over: a stolen old token.
      expiredJwt: await new SignJWT({ username: 'admin', tokenVersion: 0 }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(now - 7200).setExpirationTime(now - 3600).sign(key),
      // A fresh admin claim under a key the server never had.
      forgedJwt: await new SignJWT({ username: 'admin', tokenVersion: 0 })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt(now)
        .setExpirationTime(now + 3600)
        .sign(new TextEncoder().encode('not-the-server-secret-0123456789')),
    };
  });

  afterAll(async () => {
    await w?.app.close();
    await w?.runtime.lifecycle.shutdown('test');
    await closeBackends();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('has every route of the app in the table, each with a declared access', () => {
    const table = w.app.routeAccess;
    expect(table.length).toBeGreaterThan(90);
    // A sample from each family, so that an empty or partial table cannot pass.
    for (const [method, url, access] of [
      ['POST', '/api/v1/auth/login', 'public'],
      ['POST', '/api/v1/chat/completions', 'chat'],
      ['PUT', '/api/v1/auth/password', 'self'],
      ['GET', '/api/v1/agents', 'user'],
      ['PUT', '/api/v1/agents/:agentId', 'owner'],
      ['PUT', '/api/v1/config', 'admin'],
      ['POST', '/api/v1/users', 'admin'],
      ['GET', '/health', 'public'],
    ] as const) {
      expect(table.find((r) => r.method === method && r.url === url)?.access, `${method} ${url}`).toBe(access);
    }
    for (const r of table.filter((r) => r.url !== '*')) expect(w.app.hasRoute({ method: r.method as 'GET', url: r.url }), `${r.method} ${r.url}`).toBe(true);
  });

  it('answers every route x caller as its declared access says, and no spelling of a path gets further than the plain one', { timeout: 600_000 }, async () => {
    const routes = w.app.routeAccess.filter((r) => r.method !== 'HEAD' && !(r.method === 'OPTIONS' && r.url === '*'));
    let n = 0;
    let checked = 0;
    for (const route of routes) {
      n += 1;
      const params = await fixturesFor(w, route, n);
      const url = concrete(route, params);
      // Callers that must be refused first: a refused call changes nothing, so the owner and the admin still find their rows.
      for (const caller of CALLERS) {
        const want = expected(route.access, caller);
        if (want === 'pass') continue;
        for (const [how, spelled] of [['plain', url] as [string, string], ...spellings(url)]) {
          const res = await call(w, route.method, spelled, caller);
          const label = `${route.method} ${route.url} (${route.access}) as ${caller}, ${how}: ${spelled}`;
          // A spelling the router does not fold into the route is a 404 to everyone; one it folds is refused like the plain path.
          if (how !== 'plain' && res.statusCode === 404) continue;
          check(res, want, label);
          checked += 1;
        }
      }
      for (const caller of CALLERS) {
        const want = expected(route.access, caller);
        if (want !== 'pass') continue;
        const res = await call(w, route.method, url, caller);
        const label = `${route.method} ${route.url} (${route.access}) as ${caller}: ${url}`;
        // A public route's handler may refuse on its own terms (a webhook's signature): the guard let it through.
        if (route.access === 'public') expect(res.statusCode, label).toBeLessThan(500);
        else check(res, want, label);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(routes.length * 5);
  });

  it('answers an unknown path 404 to every caller, without asking for credentials', async () => {
    for (const [method, url] of [
      ['GET', '/api/v1/models/some-agent/details'],
      ['POST', '/api/v1/embeddings'],
      ['GET', '/api/v1/nothing/here'],
      ['DELETE', '/api/v1/agents'],
    ] as const) {
      for (const caller of CALLERS) {
        const res = await call(w, method, url, caller);
        expect(res.statusCode, `${method} ${url} as ${caller}`).toBe(404);
        expect(res.json().error, `${method} ${url} as ${caller}`).not.toMatch(/JWT|API key|log in|credential/i);
      }
    }
  });
}

describe('access matrix (embedded: PGlite, in-process bus)', () => {
  matrix(async () => ({ db: () => createTestPglite(), bus: (logger) => createMemoryBus({ logger }), close: async () => {} }));
});

describeWithServers('access matrix (cluster: Postgres, Redis)', () => {
  let database: TestDatabase | undefined;
  const prefix = uniqueRedisPrefix();
  matrix(async () => {
    database = await createTestDatabase();
    const handle = database.handle;
    return {
      db: async () => ({ ...handle, close: async () => {} }),
      bus: (logger) => createRedisBus({ url: redisUrl(), prefix, logger }),
      close: async () => {
        await database?.drop();
        await cleanupRedisPrefix(redisUrl(), prefix);
      },
    };
  });
});

describe('route declarations', () => {
  it('refuses to build a gateway with a route that declares no access', async () => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-matrix-decl-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), CONFIG);
    const runtime = await matrixRuntime(cwd, () => createTestPglite(), (logger) => createMemoryBus({ logger }));
    const app = await buildGateway(runtime);
    try {
      expect(() => app.get('/api/v1/forgotten', async () => ({ secret: true }))).toThrow(/GET \/api\/v1\/forgotten declares no access/);
      expect(() => app.put('/api/v1/owned', { config: { access: 'owner' } }, async () => ({}))).toThrow(/does not say what it owns/);
    } finally {
      await app.close();
      await runtime.lifecycle.shutdown('test');
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });
});
