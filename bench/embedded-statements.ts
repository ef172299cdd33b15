/**
 * Issue 39: the statements PGlite executes per embedded chat run under load, counted (never
 * timed) where they enter its backend: the standalone's services on one runtime in this process
 * (PGlite in a new data folder, the in-process bus), the bench's fake model, C clients back to
 * back, non-streamed then 50-token streams. Prints each kind of statement per run. On PGlite
 * one statement is ~0.3 ms of the process's CPU (docs/benchmarks.md, "Issue 39: embedded mode
 * CPU per run"), so this count is most of what a lifecycle change of the run saves.
 *
 *   npx tsx --conditions=@agentry/source bench/embedded-statements.ts [--runs=400] [--concurrency=16]
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import { createMemoryBus } from '@agentry/bus';
import { openPglite } from '@agentry/db';
import { bootstrap } from '@agentry/runtime';
import { startStandalone } from '@agentry/standalone';
import { tracePgliteStatements } from '@agentry/testing';
import { startBenchFake } from './fake-model.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const RUNS = Number(option('runs') ?? 400);
const CONCURRENCY = Number(option('concurrency') ?? 16);
const KEY = 'bench-account-key-0123456789abcdef';

/** Statements by their first words (or the named statement's), as Execute messages reach PGlite. */
const seen = new Map<string, number>();
let counting = false;
tracePgliteStatements(PGlite, (sql) => {
  if (!counting) return;
  const kind = sql.slice(0, 60);
  seen.set(kind, (seen.get(kind) ?? 0) + 1);
});

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-embedded-statements-'));
const fake = await startBenchFake({ tokens: 50 });
fs.writeFileSync(
  path.join(work, 'config.yaml'),
  [
    'logging: {level: warn}',
    'server: {host: 127.0.0.1, max_connections_per_address: 0}',
    'models:',
    '  default_provider: fake',
    `  providers: {fake: {base_url: "${fake.url}", api_key: "k", model: fake-model}}`,
    `channels: {api: {accounts: {bench: {name: Bench, api_key: "${KEY}"}}}}`,
    'security: {rateLimit: {chat: {requests: 0}}}',
  ].join('\n'),
);
const runtime = await bootstrap({
  service: 'standalone',
  mode: 'embedded',
  argv: [],
  env: { PORT: '0', HOST: '127.0.0.1', AGENTRY_SECRET_KEY: randomBytes(32).toString('base64') },
  cwd: work,
  logDestination: { write: () => {} },
  openDb: (logger) => openPglite({ dataDir: path.join(work, 'data'), logger }),
  openBus: (logger) => createMemoryBus({ logger }),
});
const { port } = await startStandalone(runtime);
const created = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ ruleChain: { id: 'bench', name: 'Bench' }, metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] } }),
});
if (created.status !== 201) throw new Error(`creating the agent: HTTP ${created.status}`);

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
function once(stream: boolean): Promise<void> {
  const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream });
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/api/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}
async function load(n: number, stream: boolean): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < n) await once(stream);
  }));
}

for (const stream of [false, true]) {
  await load(100, stream);
  // The warm-up's usage rows are written within the batch window.
  await new Promise((r) => setTimeout(r, 300));
  seen.clear();
  counting = true;
  await load(RUNS, stream);
  await new Promise((r) => setTimeout(r, 300));
  counting = false;
  const total = [...seen.values()].reduce((a, b) => a + b, 0);
  console.log(`\n${stream ? '50-token streams' : 'non-streamed'}, ${RUNS} runs at C=${CONCURRENCY}: ${(total / RUNS).toFixed(2)} statements per run`);
  for (const [kind, n] of [...seen].sort((a, b) => b[1] - a[1])) console.log(`  ${(n / RUNS).toFixed(2)}  ${kind}`);
}
await runtime.lifecycle.shutdown('bench');
await fake.close();
fs.rmSync(work, { recursive: true, force: true });
