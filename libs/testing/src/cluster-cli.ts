/**
 * `npm run cluster`: the cluster-mode deployment on this machine, without Docker. Runs the
 * migrations once (the rollout's migrate job), then starts as separate processes on loopback
 * against the local Postgres and Redis: 2 gateways, 2 agent-workers, 2 schedulers and a
 * channel-connector, with a round-robin proxy on PORT (default 9527) standing in for the
 * ingress. Ctrl-C stops them all.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/agentry_cluster,
 * created when missing), REDIS_URL (redis://127.0.0.1:6379), AGENTRY_SECRET_KEY (else one is
 * generated once under ./data/cluster-secret.key), AGENTRY_CONFIG or --config (else ./config.yaml
 * when present), PORT, and CLUSTER_GATEWAYS / CLUSTER_WORKERS / CLUSTER_SCHEDULERS /
 * CLUSTER_CONNECTORS to change the counts.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrateToLatest } from '@agentry/db';
import { openPostgres } from '@agentry/db/postgres';
import { startLocalCluster, type LocalCluster } from './cluster.js';

const cwd = process.cwd();
const count = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 16) fail(`${name} must be an integer from 0 to 16, got "${raw}"`);
  return n;
};
function fail(message: string): never {
  console.error(`cluster: ${message}`);
  process.exit(1);
}

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/agentry_cluster';
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const port = (() => {
  const raw = process.env.PORT;
  const n = raw ? Number(raw) : 9527;
  if (!Number.isInteger(n) || n < 1 || n > 65535) fail(`PORT must be a TCP port, got "${raw}"`);
  return n;
})();
const configArg = process.argv.indexOf('--config');
const configPath = (() => {
  const given = configArg >= 0 ? process.argv[configArg + 1] : process.env.AGENTRY_CONFIG;
  if (given) return path.resolve(cwd, given);
  const local = path.join(cwd, 'config.yaml');
  if (fs.existsSync(local)) return local;
  const empty = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cluster-')), 'config.yaml');
  fs.writeFileSync(empty, '{}\n');
  return empty;
})();
const secretKey = (() => {
  if (process.env.AGENTRY_SECRET_KEY) return process.env.AGENTRY_SECRET_KEY;
  const file = path.join(cwd, 'data', 'cluster-secret.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600 });
  }
  return fs.readFileSync(file, 'utf8').trim();
})();

await ensureDatabase(databaseUrl);
const db = openPostgres({ url: databaseUrl });
const { applied } = await migrateToLatest(db.db);
await db.close();
console.log(`cluster: database ${redact(databaseUrl)} migrated${applied.length ? ` (${applied.length} applied)` : ' (up to date)'}`);

const counts = {
  gateways: count('CLUSTER_GATEWAYS', 2),
  workers: count('CLUSTER_WORKERS', 2),
  schedulers: count('CLUSTER_SCHEDULERS', 2),
  connectors: count('CLUSTER_CONNECTORS', 1),
};
if (counts.gateways === 0) fail('CLUSTER_GATEWAYS must be at least 1');
console.log(`cluster: starting ${counts.gateways} gateways, ${counts.workers} workers, ${counts.schedulers} schedulers, ${counts.connectors} connectors...`);
// Set once started; a signal before that stops whatever has started so far.
const running: { cluster?: LocalCluster } = {};
let stopping = false;
const stop = async (why: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`cluster: ${why}, stopping every process...`);
  await running.cluster?.stop('SIGTERM');
  process.exit(0);
};
process.on('SIGINT', () => void stop('interrupted'));
process.on('SIGTERM', () => void stop('terminated'));

const cluster = await startLocalCluster({
  configPath,
  databaseUrl,
  redisUrl,
  redisPrefix: process.env.REDIS_PREFIX || 'agentry',
  secretKey,
  ...counts,
  proxy: { host: '127.0.0.1', port },
  echo: (name, line) => process.stdout.write(`${name.padEnd(12)} ${line}\n`),
  // Compiled, as the image runs them (built first when the sources are newer).
  runtime: 'compiled',
});
running.cluster = cluster;
console.log(`cluster: ready on ${cluster.url} (round-robin over ${cluster.gatewayUrls.join(', ')}); Ctrl-C stops it`);
for (const p of cluster.processes) {
  void p.exited().then((code) => {
    if (!stopping) console.error(`cluster: a process exited (code ${code}); the others keep running`);
  });
}

/** Creates the database named in the URL when the server does not have it (a first run). */
async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  try {
    await client.connect();
  } catch (err) {
    fail(`cannot reach Postgres at ${redact(url)}: ${(err as Error).message}`);
  }
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`create database ${pg.escapeIdentifier(name)}`);
      console.log(`cluster: created database ${name}`);
    }
  } finally {
    await client.end();
  }
}

function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}
