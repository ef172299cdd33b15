import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { builtinTools } from '@agentry/engine';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel, type FakeModelOptions, type FakeRequest, type FakeTextReply } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { OPENAI_ROUTE, openaiErrorMessage } from './openai-error.js';

/**
 * The e2e harness: what the in-process suites (a gateway and an agent worker in the test's
 * process, PGlite, the in-process bus, the fake model) set up alike, kept here so that each file
 * says only what it tests. Process-mode targets are `targets.ts`.
 */

export interface EmbeddedRuntime {
  runtime: Runtime;
  /** The runtime's folder (its config.yaml, workspaces). */
  cwd: string;
  /** Shuts the runtime down and removes its folder. */
  stop(): Promise<void>;
}

/**
 * The embedded runtime as a test boots it: a fresh folder holding `configLines` as config.yaml,
 * PGlite from the migrated snapshot, the in-process bus, no log output. Workers and the gateway
 * are the caller's to start. `service` names it in logs and metrics (`standalone` for what
 * `npm start` runs); `log` receives the log lines a test reads.
 */
export async function bootEmbedded(
  name: string,
  configLines: string[],
  opts: { service?: string; log?: (line: string) => void } = {},
): Promise<EmbeddedRuntime> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), `agentry-${name}-`));
  fs.writeFileSync(path.join(cwd, 'config.yaml'), configLines.join('\n'));
  const runtime = await bootstrap({
    service: opts.service ?? name,
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: `${name}-master-key-0123456789-abcdef` },
    cwd,
    logDestination: { write: opts.log ?? (() => {}) },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  return {
    runtime,
    cwd,
    async stop() {
      await runtime.lifecycle.shutdown('test');
      fs.rmSync(cwd, { recursive: true, force: true });
    },
  };
}

/** The fake model as the configuration's only provider (`models:` and its lines). */
export function fakeModelConfig(fake: Pick<FakeModel, 'url'>, apiKey?: string): string[] {
  const key = apiKey === undefined ? '' : ` api_key: "${apiKey}",`;
  return ['models:', '  default_provider: fake', `  providers: {fake: {base_url: "${fake.url}",${key} model: fake-model}}`];
}

/** An `ai/agent` node (id `agent`) on the fake provider, with `configuration` over it. */
export function agentNode(configuration: Record<string, unknown> = {}) {
  return { id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', ...configuration } };
}

/** An agent's DSL: one `ai/agent` node on the fake provider, with `configuration` over it. */
export function agentDsl(id: string, configuration: Record<string, unknown> = {}) {
  return { ruleChain: { id, name: id }, metadata: { nodes: [agentNode(configuration)], connections: [] } };
}

/** A fake-model reply that answers with the last tool result as its text, so a test reads what a tool did. */
export function answerWithToolResult(req: FakeRequest): FakeTextReply {
  const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
  return { text: String(result?.content ?? '(no tool result)') };
}

/** Checks a status and, when given, the human error message (OpenAI's error shape on OpenAI routes). */
export function expectStatus(res: LightMyRequestResponse, status: number, message?: RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  if (!message) return;
  const body = res.json() as { error: unknown };
  expect(OPENAI_ROUTE.test(res.raw.req.url ?? '') ? openaiErrorMessage(body) : body.error).toMatch(message);
}

export interface InProcessStackOptions<U extends string> {
  /** Names the temporary folder, the service and the master key. */
  name: string;
  /** `security.users`: a password, or the object form (password, api_key, budget) as data. */
  users: Record<U, string | Record<string, unknown>>;
  /** Who logs in at the start (a token each in `tokens`); every user by default. */
  login?: ReadonlyArray<NoInfer<U>>;
  /** More lines under `security:` (two spaces in), e.g. quotas. */
  security?: string[];
  /** More top-level configuration lines, e.g. `channels:`. */
  config?: string[];
  fakeModel?: FakeModelOptions;
  /** Gives the worker the built-in tools (bash, read, write ...). */
  builtinTools?: boolean;
  timeoutMs?: number;
}

export interface InProcessStack<U extends string> {
  readonly runtime: Runtime;
  readonly app: FastifyInstance;
  readonly fake: FakeModel;
  /** A bearer token per logged-in user, filled before the first test. */
  readonly tokens: Record<U, string>;
  /**
   * A request through `app.inject`: a path without `/api/v1` gets it; one that already has it, or
   * a spelling that does not start with `/`, goes as written. `token` is a login token or an API key.
   */
  call(method: InjectOptions['method'], url: string, token?: string, payload?: unknown): Promise<LightMyRequestResponse>;
  /** Creates an agent (or any chain) as `token`, expecting 201. */
  create(token: string, dsl: unknown, route?: '/agents' | '/rules'): Promise<void>;
}

/**
 * Starts the whole embedded stack for the enclosing describe (or the file): requireAuth on, the
 * given users logged in, an in-process worker, the fake model; and stops it after.
 */
export function inProcessStack<U extends string>(opts: InProcessStackOptions<U>): InProcessStack<U> {
  let embedded: EmbeddedRuntime | undefined;
  let runtime: Runtime | undefined;
  let app: FastifyInstance | undefined;
  let fake: FakeModel | undefined;
  const tokens = {} as Record<U, string>;
  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the ${opts.name} stack has no ${what}: its beforeAll did not run or failed`);
    return value;
  };
  const call: InProcessStack<U>['call'] = (method, url, token, payload) =>
    started(app, 'gateway').inject({
      method,
      url: url.startsWith('/api/v1') || !url.startsWith('/') ? url : `/api/v1${url}`,
      headers: token ? { authorization: `Bearer ${token}` } : {},
      ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }),
    });

  beforeAll(async () => {
    fake = await startFakeModel(opts.fakeModel);
    const users = Object.entries(opts.users) as Array<[U, string | Record<string, unknown>]>;
    // JSON is YAML: the object form goes as written, keys and all.
    embedded = await bootEmbedded(opts.name, [
      'server: {host: 127.0.0.1}',
      ...fakeModelConfig(fake),
      'security:',
      '  requireAuth: true',
      ...(opts.security ?? []),
      '  users:',
      ...users.map(([name, entry]) => `    ${name}: ${JSON.stringify(entry)}`),
      ...(opts.config ?? []),
    ]);
    runtime = embedded.runtime;
    await startAgentWorker(runtime, opts.builtinTools ? { builtin: builtinTools } : undefined);
    await seedGateway(runtime);
    app = await buildGateway(runtime);
    await app.ready();
    runtime.health.markStarted();
    for (const user of opts.login ?? users.map(([name]) => name)) {
      const entry = opts.users[user];
      const password = typeof entry === 'string' ? entry : entry.password;
      const res = await call('POST', '/auth/login', undefined, { username: user, password });
      expect(res.statusCode, `login of ${user}: ${res.body}`).toBe(200);
      tokens[user] = (res.json() as { token: string }).token;
    }
  }, opts.timeoutMs ?? 120_000);

  afterAll(async () => {
    await app?.close();
    await embedded?.stop();
    await fake?.close();
  });

  return {
    get runtime() {
      return started(runtime, 'runtime');
    },
    get app() {
      return started(app, 'gateway');
    },
    get fake() {
      return started(fake, 'fake model');
    },
    tokens,
    call,
    async create(token, dsl, route = '/agents') {
      expectStatus(await call('POST', route, token, dsl), 201);
    },
  };
}
