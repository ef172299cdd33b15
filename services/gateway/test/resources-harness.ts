import { crc32 } from 'node:zlib';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import type { DbHandle } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestDatabase, createTestPglite, describeWithPostgres, type TestDatabase } from '@agentry/testing';
import { buildGateway } from '@agentry/gateway';

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
    const app = await buildGateway(runtime);
    await app.ready();
    runtime.health.markStarted();
    env = {
      app,
      runtime,
      db: runtime.db.db,
      dialect: runtime.db.dialect,
      replica: async () => {
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

/** Runs `suite` twice: on PGlite (embedded) and on a fresh Postgres database. */
export function describeOnBothEngines(name: string, suite: (env: () => Env) => void): void {
  describe(`${name} (embedded, PGlite)`, () => {
    suite(harness(() => createTestPglite()));
  });
  describeWithPostgres(`${name} (Postgres)`, () => {
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

/** A multipart/form-data body built by hand (no form-data dependency). */
export function multipart(parts: Array<{ name: string; value: string | Buffer; filename?: string; contentType?: string }>): {
  payload: Buffer;
  headers: Record<string, string>;
} {
  const boundary = `----agentry${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
    if (part.filename !== undefined) head += `; filename="${part.filename}"`;
    head += '\r\n';
    if (part.filename !== undefined) head += `Content-Type: ${part.contentType ?? 'application/zip'}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.isBuffer(part.value) ? part.value : Buffer.from(part.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

export interface RawZipEntry {
  name: string;
  /** The bytes as stored (already deflated when method is 8). */
  data: Buffer;
  method?: 0 | 8;
  /** Declared uncompressed size (default: data.length, right for stored entries). */
  size?: number;
  crc?: number;
  /** Unix mode (made-by UNIX) when given, e.g. 0o120777 for a symbolic link. */
  unixMode?: number;
}

/**
 * A zip written byte by byte, so tests can declare what they like in the headers (sizes that
 * lie, names jszip would refuse to write) without ever holding the expanded data.
 */
export function rawZip(entries: RawZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const method = e.method ?? 0;
    const size = e.size ?? e.data.length;
    const crc = e.crc ?? (method === 0 ? crc32(e.data) : 0);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(e.data.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(e.unixMode !== undefined ? (3 << 8) | 20 : 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(e.data.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(e.unixMode !== undefined ? (e.unixMode << 16) >>> 0 : 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, e.data);
    centrals.push(central, name);
    offset += local.length + name.length + e.data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}
