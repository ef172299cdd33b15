import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import type { DbHandle } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

export const MASTER_KEY = 'test-master-key-0123456789-abcdefghij';

export interface Harness {
  runtime: Runtime;
  app: FastifyInstance;
  logs: string[];
  close(): Promise<void>;
}

/**
 * A gateway on a runtime built from the given YAML. `db` lets two harnesses share storage (a
 * restart); a shared handle is not closed by the harness.
 */
export async function startHarness(yaml: string, opts: { db?: DbHandle; env?: Record<string, string> } = {}): Promise<Harness> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-auth-'));
  fs.writeFileSync(path.join(cwd, 'config.yaml'), yaml);
  const logs: string[] = [];
  const shared = opts.db;
  const runtime = await bootstrap({
    service: 'gateway-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: MASTER_KEY, ...opts.env },
    cwd,
    logDestination: { write: (l: string) => void logs.push(l) },
    openDb: async () => (shared ? { ...shared, close: async () => {} } : createTestPglite()),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  let app: FastifyInstance;
  try {
    await seedGateway(runtime);
    app = await buildGateway(runtime);
  } catch (err) {
    await runtime.lifecycle.shutdown('test: build failed');
    fs.rmSync(cwd, { recursive: true, force: true });
    throw err;
  }
  // A stand-in for the chat route (it arrives with chat completions): guarded like it.
  app.post('/api/v1/test-chat', { config: { access: 'chat' } }, async (req) => ({ principal: req.principal }));
  await app.ready();
  runtime.health.markStarted();
  return {
    runtime,
    app,
    logs,
    close: async () => {
      await app.close();
      await runtime.lifecycle.shutdown('test');
      fs.rmSync(cwd, { recursive: true, force: true });
    },
  };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export async function login(app: FastifyInstance, username: string, password: string): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password } });
  if (res.statusCode !== 200) throw new Error(`login ${username} failed: ${res.statusCode} ${res.body}`);
  return (res.json() as { token: string }).token;
}
