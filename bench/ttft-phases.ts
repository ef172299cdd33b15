/**
 * Issue 39: where a cluster stream's time to first token goes, phase by phase, without a line of
 * instrumentation in the services. One gateway and one agent-worker (compiled) on a throwaway
 * database and a redis-server of their own, the fake model in this process (no delay, 50 tokens
 * in one write), one stream at a time. Three clocks, all the box's wall clock: this client's
 * (request sent, first content token read), Redis `MONITOR`'s timestamp of each command (the
 * server's, in microseconds) and the fake's (its HTTP request seen, `diagnostics_channel`). The
 * commands of one run mark its phases, in the order a run makes them:
 *
 *   sent -> enqueue (the gateway's BullMQ add: HTTP, auth, the run insert and its commit are before it)
 *        -> moveToActive (the worker's blocking pop woke up; it takes the job)
 *        -> lease SET NX (the job is in hand)
 *        -> PUBSUB NUMSUB (the watchdog's `clientWaiting`: the claim and its commit are before it; since
 *           agent-run v3 it leaves in the lease's write, and the claim is in the next phase)
 *        -> provider request (agent configuration, the HTTP request to the model)
 *        -> first publish (the first delta parsed and published)
 *        -> first token at the client (the gateway's relay and SSE write).
 *
 * MONITOR (a `redis-cli` process of its own, writing to a file) slows Redis a little: every
 * command is copied to it. The phases without Redis are not touched. `--async-commit` runs the same after `ALTER DATABASE ... SET synchronous_commit = off`
 * (the backends reconnected), which tells what the two WAL flushes before the first token cost.
 *
 * `--root=<dir>` runs the services of another built tree (one bench/ab.ts prepared:
 * /tmp/agentry-ab-<commit>), so that two commits can be timed one after the other.
 *
 *   npx tsx --conditions=@agentry/source bench/ttft-phases.ts [--runs=40] [--async-commit] [--root=<dir>] [--raw]
 */
import dc from 'node:diagnostics_channel';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { spawn } from 'node:child_process';
import { startBenchFake } from './fake-model.js';
import { benchKeys, startCluster } from './cluster.js';
import { BENCH_POSTGRES_URL, machineLine, pct, runBench, sleep, sortNum } from './lib.js';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const RUNS = Number(option('runs') ?? 40);
const ASYNC_COMMIT = argv.includes('--async-commit');
const RAW = argv.includes('--raw');
const ROOT_DIR = option('root');

/** Wall-clock milliseconds with the monotonic clock's resolution. */
const now = () => performance.timeOrigin + performance.now();

interface Command {
  at: number;
  source: string;
  /** The command's name, lower case. */
  name: string;
  /** The whole line as MONITOR wrote it (arguments quoted). */
  line: string;
}

/** `1795952615.656123 [0 127.0.0.1:37510] "evalsha" "5ab4..." ...` lines. */
function parseMonitor(text: string): Command[] {
  const out: Command[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\d+\.\d+) \[\d+ ([^\]]+)\] "([^"]+)"/.exec(line);
    if (m) out.push({ at: Number(m[1]) * 1000, source: m[2]!, name: m[3]!.toLowerCase(), line });
  }
  return out;
}

const PHASES = ['HTTP, auth, run insert + commit', 'queue pickup (enqueue -> moveToActive)', 'moveToActive + lease', 'lease -> listener check (the claim + commit before agent-run v3)', 'listener check -> provider request (agent config; the claim + commit since v3)', 'model answers, first delta parsed and published', 'relay to the client'] as const;

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-ttft-'));
  const fake = await startBenchFake({ tokens: 50 });
  const modelSeen: number[] = [];
  dc.subscribe('http.server.request.start', (msg) => {
    const { request } = msg as { request: http.IncomingMessage };
    if (request.url === '/v1/chat/completions') modelSeen.push(now());
  });
  const keys = benchKeys();
  const cluster = await startCluster({ gateways: 1, workers: 1, fakePort: fake.port, keys, work, name: 'ttft', runtime: 'node', ...(ROOT_DIR ? { root: ROOT_DIR } : {}) });
  try {
    if (ASYNC_COMMIT) {
      const c = new pg.Client({ connectionString: BENCH_POSTGRES_URL });
      await c.connect();
      try {
        await c.query(`alter database ${cluster.database} set synchronous_commit = off`);
        // The pools open new connections (with the setting) after theirs are ended.
        await c.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [cluster.database]);
      } finally {
        await c.end();
      }
    }
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Say fifty tokens.' }], stream: true });
    const stream = () =>
      new Promise<{ sent: number; first: number; ok: boolean }>((resolve) => {
        const sent = now();
        let first = NaN;
        let text = '';
        const req = http.request({ host: '127.0.0.1', port: cluster.port, path: '/api/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.account}` } }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            if (Number.isNaN(first) && c.includes('"content":"tok')) first = now();
            text += c;
          });
          res.on('end', () => resolve({ sent, first, ok: res.statusCode === 200 && text.includes('[DONE]') }));
        });
        req.on('error', () => resolve({ sent, first, ok: false }));
        req.end(body);
      });
    // Warm-up (connections, prepared statements, the agent's cache; and after --async-commit, the reconnects).
    for (let i = 0; i < 10; i++) await stream();
    await sleep(500);
    // Out of this process: the client's and the fake's clocks must not wait behind the copy of every command.
    const monitorFile = path.join(work, 'monitor.txt');
    const out = fs.openSync(monitorFile, 'w');
    const monitor = spawn('redis-cli', ['-u', cluster.redis.url, 'monitor'], { stdio: ['ignore', out, 'ignore'] });
    fs.closeSync(out);
    await sleep(300);
    const runs: Array<{ sent: number; first: number; ok: boolean; model: number | undefined }> = [];
    for (let i = 0; i < RUNS; i++) {
      modelSeen.length = 0;
      const r = await stream();
      runs.push({ ...r, model: modelSeen[0] });
      // The run's last commands (completion, the done event) come after the client's end.
      await sleep(30);
    }
    await sleep(300);
    monitor.kill();
    agent.destroy();
    const commands = parseMonitor(fs.readFileSync(monitorFile, 'utf8'));
    const rows: number[][] = [];
    let failed = 0;
    runs.forEach((r, i) => {
      const end = runs[i + 1]?.sent ?? Infinity;
      const cmds = commands.filter((c) => c.at >= r.sent && c.at < end);
      if (RAW && i === 0) {
        console.log(`sent 0; model seen ${((r.model ?? NaN) - r.sent).toFixed(2)}; first token ${(r.first - r.sent).toFixed(2)}`);
        for (const c of cmds) console.log(`${(c.at - r.sent).toFixed(3).padStart(8)} ${c.source} ${c.line.slice(0, 160)}`);
      }
      const phases = phasesOf(r, cmds, r.model);
      if (!r.ok || !phases) failed++;
      else rows.push(phases);
    });
    const p50 = (i: number) => pct(sortNum(rows.map((r) => r[i]!)), 50);
    const p90 = (i: number) => pct(sortNum(rows.map((r) => r[i]!)), 90);
    const total = rows.map((r) => r.reduce((a, b) => a + b, 0));
    console.log(`\n${new Date().toISOString()} ${machineLine()}${ROOT_DIR ? `; services from ${ROOT_DIR}` : ''}; ${rows.length} streams (${failed} not parsed), synchronous_commit ${ASYNC_COMMIT ? 'off' : 'on'}; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}\n`);
    console.log('| phase | p50 ms | p90 ms |\n|---|---:|---:|');
    PHASES.forEach((name, i) => console.log(`| ${name} | ${p50(i).toFixed(2)} | ${p90(i).toFixed(2)} |`));
    // Since agent-run v3 the listener check leaves with the lease, before the claim: the two rows
    // above then split at the lease's write, not after the claim. Their sum compares across trees.
    const leaseToModel = sortNum(rows.map((r) => r[3]! + r[4]!));
    console.log(`| (lease -> provider request: claim, listener check, agent, request) | ${pct(leaseToModel, 50).toFixed(2)} | ${pct(leaseToModel, 90).toFixed(2)} |`);
    console.log(`| **time to first token** | **${pct(sortNum(total), 50).toFixed(2)}** | ${pct(sortNum(total), 90).toFixed(2)} |`);
  } finally {
    await cluster.stop();
    await fake.close();
  }
}

/**
 * One run's phase durations from its commands, or undefined when one of the marks is missing.
 * The gateway's and the worker's connections are told apart by what they send: the enqueue is the
 * first EVALSHA after the request was sent, the pickup the next EVALSHA from another connection.
 */
function phasesOf(r: { sent: number; first: number }, cmds: Command[], modelSeen: number | undefined): number[] | undefined {
  const from = (t: number | undefined, test: (c: Command) => boolean) => (t === undefined ? undefined : cmds.find((c) => c.at >= t && test(c)));
  const enqueue = from(r.sent, (c) => c.name === 'evalsha');
  const pickup = from(enqueue?.at, (c) => c.source !== enqueue!.source && c.source !== 'lua' && c.name === 'evalsha');
  const lease = from(pickup?.at, (c) => c.name === 'set' && c.line.includes('"NX"') && c.line.includes('run-lease'));
  // Since agent-run v3 the check leaves in the lease's write (either may come first there).
  const numsub = from(pickup?.at, (c) => c.name === 'pubsub');
  const publish = from(modelSeen, (c) => c.source !== 'lua' && (c.name === 'publish' || c.name === 'evalsha') && c.line.includes('tok'));
  if (!enqueue || !pickup || !lease || !numsub || !publish || modelSeen === undefined || Number.isNaN(r.first)) return undefined;
  const checked = Math.max(numsub.at, lease.at);
  return [enqueue.at - r.sent, pickup.at - enqueue.at, lease.at - pickup.at, checked - lease.at, modelSeen - checked, publish.at - modelSeen, r.first - publish.at];
}

runBench(main, 10 * 60_000);
