import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import type { DbHandle } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestDatabase, createTestPglite, describeAlsoOnPostgres, type TestDatabase } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

/**
 * The agents/rules/skills/workspace suites: each defines its cases once and runs them on the
 * embedded runtime (PGlite) and on real Postgres.
 */

export interface Env {
  app: FastifyInstance;
  runtime: Runtime;
  db: DbHandle['db'];
  dialect: DbHandle['dialect'];
  /** A second gateway on the same database and bus: another replica with its own caches. */
  replica(): Promise<FastifyInstance>;
  req(method: InjectOptions['method'], url: string, payload?: unknown): Promise<LightMyRequestResponse>;
  /** Every log line written so far (JSON lines). */
  logs(): string;
}

const CONFIG = [
  'models:',
  '  default_provider: p1',
  '  providers:',
  '    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-provider-secret, models: [{name: m1, alias: default}]}',
].join('\n');

function harness(open: () => Promise<DbHandle>, cleanup: () => Promise<void> = async () => {}): () => Env {
  let env: Env | undefined;
  let cwd = '';
  const replicas: FastifyInstance[] = [];
  const logLines: string[] = [];
  beforeAll(async () => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-res-'));
    fs.writeFileSync(path.join(cwd, 'config.yaml'), CONFIG);
    const runtime = await bootstrap({
      service: 'gateway-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'test-master-key-0123456789-abcdefghij' },
      cwd,
      logDestination: { write: (line: string) => void logLines.push(line) },
      openDb: open,
      openBus: (logger) => createMemoryBus({ logger }),
    });
    await seedGateway(runtime);
    const app = await buildGateway(runtime);
    await app.ready();
    runtime.health.markStarted();
    env = {
      app,
      runtime,
      db: runtime.db.db,
      dialect: runtime.db.dialect,
      replica: async () => {
        await seedGateway(runtime);
        const other = await buildGateway(runtime);
        await other.ready();
        replicas.push(other);
        return other;
      },
      logs: () => logLines.join(''),
      req: (method, url, payload) =>
        app.inject({ method, url, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) }),
    };
  });
  afterAll(async () => {
    for (const r of replicas) await r.close();
    await env?.app.close();
    await env?.runtime.lifecycle.shutdown('test');
    await cleanup();
    if (cwd) fs.rmSync(cwd, { recursive: true, force: true });
  });
  return () => {
    if (!env) throw new Error('the harness is not started');
    return env;
  };
}

/** Runs `suite` twice: on PGlite (embedded) and on a fresh Postgres database (the full tier only). */
export function describeOnBothEngines(name: string, suite: (env: () => Env) => void): void {
  describe(`${name} (embedded, PGlite)`, () => {
    suite(harness(() => createTestPglite()));
  });
  describeAlsoOnPostgres(`${name} (Postgres)`, () => {
    let test: TestDatabase | undefined;
    suite(
      harness(
        async () => {
          test = await createTestDatabase();
          return test.handle;
        },
        async () => {
          await test?.drop();
        },
      ),
    );
  });
}

let counter = 0;
/** A fresh id for this test file (`prefix_7`). */
export function uid(prefix: string): string {
  counter += 1;
  return `${prefix}_${counter}`;
}

/** A minimal valid agent DSL. */
export function agentDsl(id: string, name = `Agent ${id}`, extra: { category?: string } = {}) {
  return {
    ruleChain: { id, name, additionalInfo: { category: extra.category ?? 'agents', description: `the ${id} agent` } },
    metadata: {
      firstNodeIndex: 0,
      nodes: [
        { id: 'node_agent', type: 'ai/agent', name: 'Agent', configuration: { provider: 'p1', systemPrompt: 'Be brief.', maxStep: 10 } },
        { id: 'node_end', type: 'end' },
      ],
      connections: [{ fromId: 'node_agent', toId: 'node_end', type: 'Success' }],
    },
  };
}

/** A minimal valid rule chain (no agent node). */
export function ruleDsl(id: string, category?: string) {
  return {
    ruleChain: { id, name: `Rule ${id}`, ...(category ? { additionalInfo: { category } } : {}) },
    metadata: {
      nodes: [
        { id: 'filter', type: 'jsFilter', configuration: { jsScript: 'return true;' } },
        { id: 'log', type: 'log' },
      ],
      connections: [{ fromId: 'filter', toId: 'log', type: 'True' }],
    },
  };
}

export async function createAgent(env: () => Env, id: string): Promise<void> {
  const res = await env().req('POST', '/api/v1/agents', agentDsl(id));
  if (res.statusCode !== 201) throw new Error(`creating agent ${id}: ${res.statusCode} ${res.body}`);
}

export { multipart, rawZip, type RawZipEntry } from '@agentry/testing';
