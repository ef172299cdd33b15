/**
 * Issue 39, "Memory": what an embedded server (the standalone, compiled, as `npm start` runs it:
 * PGlite and the in-process bus) holds right after it starts and after a load, and where it goes.
 *
 *   npm run bench:memory                                  # writes docs/benchmarks.md
 *   npm run bench:memory -- --no-write --requests=500     # print only
 *   npm run bench:memory -- --node-args=--max-semi-space-size=1 --label=semi1   # an A/B variant
 *
 * One round: a fresh data directory is created by a first start (initdb, migrations) and that
 * process stopped; then the server is started again on it (the start a user makes every day),
 * waited for (`/ready`), left idle `--settle` seconds, and measured; then `--requests` non-streamed
 * chats through the fake model (bench/fake-model.ts, its own process) at `--concurrency`, idle
 * again, measured again. The first start is measured too (its peak is initdb's). Figures: VmRSS
 * and VmHWM from /proc/<pid>/status; V8's heap and the external memory from the server's own
 * /metrics (prom-client's default metrics); PGlite's WebAssembly memory from
 * `agentry_pglite_memory_bytes` (its size) and /proc/<pid>/smaps (the resident part of that one
 * mapping, which V8 maps at exactly that size). Memory figures hardly move on a busy box; times do.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { freePort } from '@agentry/testing';
import { fakeAnswer } from './fake-model.js';
import { START_TIMEOUT_MS, agentryRequest, benchKeys, createBenchAgent, sendN, writeBenchConfig } from './cluster.js';
import { CLK_TCK, ROOT, commandLine, cpuTicks, machineLine, onCleanup, runBench, sleep, spawnEntry, waitForHttp, writeDocSection, type Child } from './lib.js';

const argv = process.argv.slice(2);
const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
for (const a of argv) {
  if (!/^--(no-write|dist|requests=\d+|concurrency=\d+|settle=\d+|label=.+|node-args=.+)$/.test(a)) {
    console.error(`unknown argument ${a}; use --no-write --dist --requests=N --concurrency=N --settle=S --label=TEXT --node-args="FLAGS"`);
    process.exit(2);
  }
}
const WRITE = !argv.includes('--no-write');
const REQUESTS = Number(flag('requests') ?? 2000);
const CONCURRENCY = Number(flag('concurrency') ?? 16);
const SETTLE_S = Number(flag('settle') ?? 10);
/** The node flags of `npm start` (package.json), then the variant's (a later V8 flag wins: `--no-liftoff-only` undoes it). */
const START_FLAGS = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start!.split(/\s+/).filter((w) => w.startsWith('--'));
const VARIANT_FLAGS = flag('node-args')?.split(/\s+/).filter(Boolean) ?? [];
const NODE_ARGS = [...START_FLAGS, ...VARIANT_FLAGS];
const LABEL = flag('label');
/**
 * `npm start` runs the standalone's bundle once one is up to date (scripts/start.mjs, --bundle):
 * made here first and measured, unless --dist (the compiled files one by one, as the image runs them).
 */
const ENTRY = 'services/standalone/src/main.ts';
const BUNDLED = !argv.includes('--dist');
const TOKENS = 50;
const ANSWER = fakeAnswer(TOKENS);
const MB = 1024 * 1024;
/** Issue 39's goals for the embedded server, in MB of RSS. */
const GOAL_IDLE_MB = 200;
const GOAL_LOADED_MB = 300;

interface Sample {
  rss: number;
  hwm: number;
  anon: number;
  file: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  pgliteSize: number;
  pgliteResident: number;
}

/** kB fields of /proc/<pid>/status, in MB. */
function procStatus(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of fs.readFileSync(`/proc/${pid}/status`, 'utf8').matchAll(/^(\w+):\s+(\d+) kB$/gm)) out[m[1]!] = Number(m[2]) / 1024;
  return out;
}

/** Resident MB of the mappings exactly `bytes` long (PGlite's WebAssembly memory is one such rw mapping). */
function residentOfMapping(pid: number, bytes: number): number {
  let resident = 0;
  let matches = false;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) rw/.exec(line);
    if (range) matches = parseInt(range[2]!, 16) - parseInt(range[1]!, 16) === bytes;
    else if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) matches = false;
    else if (matches && line.startsWith('Rss:')) resident += Number(/(\d+)/.exec(line)![1]) / 1024;
  }
  return resident;
}

async function metric(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^([a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$/gm)) if (!out.has(m[1]!)) out.set(m[1]!, Number(m[2]));
  return out;
}

async function sample(child: Child, port: number): Promise<Sample> {
  const m = await metric(port);
  const status = procStatus(child.pid);
  const pgliteBytes = m.get('agentry_pglite_memory_bytes') ?? NaN;
  return {
    rss: status.VmRSS ?? NaN,
    hwm: status.VmHWM ?? NaN,
    anon: status.RssAnon ?? NaN,
    file: status.RssFile ?? NaN,
    heapUsed: (m.get('nodejs_heap_size_used_bytes') ?? NaN) / MB,
    heapTotal: (m.get('nodejs_heap_size_total_bytes') ?? NaN) / MB,
    external: (m.get('nodejs_external_memory_bytes') ?? NaN) / MB,
    pgliteSize: pgliteBytes / MB,
    pgliteResident: Number.isFinite(pgliteBytes) ? residentOfMapping(child.pid, pgliteBytes) : NaN,
  };
}

const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');

function row(what: string, s: Sample): string {
  const rest = s.rss - s.pgliteResident - s.heapTotal - s.file;
  return `| ${what} | **${f0(s.rss)}** | ${f0(s.hwm)} | ${f0(s.pgliteResident)} of ${f0(s.pgliteSize)} | ${f0(s.heapUsed)} / ${f0(s.heapTotal)} | ${f0(s.external)} | ${f0(s.file)} | ${f0(rest)} |`;
}

/** Both starts open the same sealed secrets: one master key for the run. */
const SECRET_KEY = randomBytes(32).toString('base64');

function startServer(name: string, dir: string, config: string, port: number): Child {
  if (BUNDLED) {
    for (const step of ['--build-only', '--bundle-only']) execFileSync(process.execPath, [path.join(ROOT, 'scripts/start.mjs'), step, ENTRY], { cwd: ROOT, stdio: 'inherit' });
  }
  // Bundled: through the launcher as `npm start` (its compile cache included), less the web UI's check.
  return spawnEntry(name, BUNDLED ? 'scripts/start.mjs' : ENTRY, {
    args: [...(BUNDLED ? ['--bundle', ENTRY] : []), '--config', config],
    env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: SECRET_KEY },
    cwd: dir,
    nodeArgs: NODE_ARGS,
    runtime: 'node',
  });
}

async function main(): Promise<number> {
  const started = Date.now();
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-memory-'));
  onCleanup('work directory', async () => fs.rmSync(work, { recursive: true, force: true }));
  const keys = benchKeys();
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, START_TIMEOUT_MS);
  const config = writeBenchConfig(work, fakePort, keys);
  const port = await freePort();

  // The first start makes the data directory (initdb, migrations) and the bench's agent.
  console.log('first start (a new data directory)');
  const first = startServer('first-start', work, config, port);
  onCleanup('first start', () => first.stop());
  const firstStarted = Date.now();
  // initdb writes and syncs a whole cluster: minutes on a box whose disk other jobs keep busy.
  await waitForHttp(`http://127.0.0.1:${port}/ready`, 4 * START_TIMEOUT_MS, first);
  const firstMs = Date.now() - firstStarted;
  await createBenchAgent(port);
  await sleep(SETTLE_S * 1000);
  const fresh = await sample(first, port);
  await first.stop();

  console.log('second start (the data directory exists)');
  const server = startServer('standalone', work, config, port);
  onCleanup('standalone', () => server.stop());
  const startedAt = Date.now();
  await waitForHttp(`http://127.0.0.1:${port}/ready`, START_TIMEOUT_MS, server);
  const readyMs = Date.now() - startedAt;
  await sleep(SETTLE_S * 1000);
  const idle = await sample(server, port);
  console.log(row('idle', idle));

  console.log(`${REQUESTS} chats at ${CONCURRENCY} concurrent`);
  const ticks = cpuTicks(server.pid);
  const good = await sendN(agentryRequest(port, keys), REQUESTS, CONCURRENCY, (status, body) => status === 200 && body.includes(ANSWER));
  if (good !== REQUESTS) throw new Error(`${REQUESTS - good} of ${REQUESTS} chats failed:\n${server.tail()}`);
  const peak = procStatus(server.pid).VmRSS ?? NaN;
  const cpuMsPerChat = ((cpuTicks(server.pid) - ticks) * (1000 / CLK_TCK)) / REQUESTS;
  console.log(`CPU ${cpuMsPerChat.toFixed(2)} ms per chat`);
  await sleep(SETTLE_S * 1000);
  const loaded = await sample(server, port);
  console.log(row('after load', loaded));
  await server.stop();

  const variant = [LABEL, VARIANT_FLAGS.length > 0 ? `node ${VARIANT_FLAGS.join(' ')}` : ''].filter(Boolean).join(', ');
  const verdict = (mb: number, goal: number) => `${f0(mb)} MB (goal <= ${goal}: ${mb <= goal ? 'met' : 'missed'})`;
  const body = [
    '<!-- bench:memory:start -->',
    `## Memory of the embedded server (${date})`,
    '',
    `Machine: ${machineLine()}; command \`${commandLine('bench:memory')}\`${variant ? ` (variant: ${variant})` : ''}; ${Math.round((Date.now() - started) / 1000)} s; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at the end. Written by the script; re-running replaces it.`,
    '',
    `The standalone ${BUNDLED ? 'bundled' : 'compiled (dist/, not bundled)'}, as \`npm start\` runs it (node ${NODE_ARGS.join(' ') || 'without flags'}; PGlite, in-process bus), the fake model in its own process. Rows: the first start on a new data directory (initdb and migrations; its peak is initdb's), ${SETTLE_S} s after \`/ready\`; a second start on that directory ${SETTLE_S} s after \`/ready\` (idle); the same process ${SETTLE_S} s after ${REQUESTS} non-streamed chats at ${CONCURRENCY} concurrent (after load; RSS at the end of the load: ${f0(peak)} MB; the server's CPU: ${cpuMsPerChat.toFixed(2)} ms per chat, a figure the busy box moves). MB throughout. PGlite: the resident part of its WebAssembly memory (from /proc/<pid>/smaps) of its size (\`agentry_pglite_memory_bytes\`); V8 heap: used / total; external: V8's external memory (PGlite's WebAssembly memory counts in it at its full size, plus buffers); rest: RSS less PGlite's resident part, V8's heap and mapped files (malloc arenas, compiled WebAssembly and JavaScript code, thread stacks).`,
    '',
    '| process | RSS | peak RSS (VmHWM) | PGlite resident of size | V8 heap used / total | external | mapped files | rest |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    row(`first start (new data directory; \`/ready\` after ${(firstMs / 1000).toFixed(1)} s)`, fresh),
    row(`idle (second start; \`/ready\` after ${(readyMs / 1000).toFixed(1)} s)`, idle),
    row(`after ${REQUESTS} chats`, loaded),
    '',
    `**Against issue 39's goals:** idle ${verdict(idle.rss, GOAL_IDLE_MB)}; after load ${verdict(loaded.rss, GOAL_LOADED_MB)}.`,
    '<!-- bench:memory:end -->',
  ].join('\n');
  console.log(`\n${body}`);
  if (WRITE) writeDocSection('memory', body);
  return 0;
}

runBench(main, 15 * 60_000);
