/**
 * Issue 24: where a run's CPU goes below the JavaScript profile. For a cluster of one gateway and
 * one agent-worker (compiled) on a throwaway database and a redis-server of its own, per process
 * kind: CPU ms per run split into user and kernel time (/proc/<pid>/stat, no tracer attached),
 * then the system calls made per run, counted by `strace -c` attached to every process of the
 * kind (strace slows them down: its window is used for counts only, never for time).
 *
 *   npm run bench:syscalls                      # 1000 runs per window; writes docs/benchmarks.md
 *   npm run bench:syscalls -- --runs=300 --no-write
 *
 * Needs strace (apt-get install strace) and ptrace rights over the children (root, or
 * kernel.yama.ptrace_scope 0).
 */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@agentry/testing';
import { fakeAnswer } from './fake-model.js';
import { agentryRequest, benchKeys, sendN, startCluster, type RequestSpec } from './cluster.js';
import { CLK_TCK, commandLine, cpuTicksSplit, machineLine, onCleanup, postgresPids, runBench, sleep, spawnEntry, waitForQuietBox, writeDocSection } from './lib.js';

const argv = process.argv.slice(2);
for (const a of argv) {
  if (!/^--(no-write|runs=\d+)$/.test(a)) {
    console.error(`unknown argument ${a}; use --runs=<n> --no-write`);
    process.exit(2);
  }
}
const RUNS = Number(argv.find((a) => a.startsWith('--runs='))?.slice(7) ?? 1000);
const WRITE = !argv.includes('--no-write');
const TOKENS = 50;
const CONNECTIONS = 16;

type Kind = 'gateway' | 'worker' | 'postgres' | 'redis' | 'fake';
const KINDS: Kind[] = ['gateway', 'worker', 'postgres', 'redis', 'fake'];

interface Split {
  userMs: number;
  kernelMs: number;
}

/** CPU per run of each kind over `send`, without a tracer. */
async function cpuSplit(pids: Record<Kind, number[]>, send: () => Promise<number>): Promise<{ runs: number; split: Record<Kind, Split> }> {
  const before = KINDS.map((k) => pids[k].map(cpuTicksSplit));
  const runs = await send();
  const split = {} as Record<Kind, Split>;
  KINDS.forEach((k, i) => {
    let [u, s] = [0, 0];
    pids[k].forEach((pid, j) => {
      const [u1, s1] = cpuTicksSplit(pid);
      u += Math.max(0, u1 - before[i]![j]![0]);
      s += Math.max(0, s1 - before[i]![j]![1]);
    });
    split[k] = { userMs: (u * 1000) / CLK_TCK / runs, kernelMs: (s * 1000) / CLK_TCK / runs };
  });
  return { runs, split };
}

/** Parses `strace -c` output: calls per syscall. */
function parseStraceSummary(text: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line);
    if (m && m[2] !== 'total') calls.set(m[2]!, (calls.get(m[2]!) ?? 0) + Number(m[1]));
  }
  return calls;
}

/** System calls per run of each kind over `send`, strace attached to each kind's processes. */
async function syscallCounts(pids: Record<Kind, number[]>, send: () => Promise<number>, work: string): Promise<{ runs: number; calls: Record<Kind, Map<string, number>> }> {
  const tracers = KINDS.map((k) => {
    const out = path.join(work, `strace-${k}-${Date.now()}.txt`);
    const proc = spawn('strace', ['-c', '-f', '-q', '-o', out, ...pids[k].flatMap((p) => ['-p', String(p)])], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    return { kind: k, out, proc, exited, stderr: () => stderr };
  });
  // Attaching takes a moment per thread; calls made before it are not counted, which is why the
  // runs are counted only after it.
  await sleep(1500);
  for (const t of tracers) if (t.proc.exitCode !== null) throw new Error(`strace for ${t.kind} exited: ${t.stderr()}`);
  const runs = await send();
  await sleep(200);
  for (const t of tracers) t.proc.kill('SIGINT');
  await Promise.all(tracers.map((t) => t.exited));
  const calls = {} as Record<Kind, Map<string, number>>;
  for (const t of tracers) calls[t.kind] = parseStraceSummary(fs.existsSync(t.out) ? fs.readFileSync(t.out, 'utf8') : '');
  return { runs, calls };
}

async function main(): Promise<void> {
  try {
    execFileSync('strace', ['-V'], { stdio: 'ignore' });
  } catch {
    throw new Error('strace is missing: apt-get install -y strace');
  }
  const started = Date.now();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-syscalls-'));
  onCleanup('work dir', async () => fs.rmSync(work, { recursive: true, force: true }));
  const fakePort = await freePort();
  const fake = spawnEntry('fake', 'bench/fake-model.ts', { args: [`--port=${fakePort}`, '--ttft-ms=0', '--tokens-per-second=0', `--tokens=${TOKENS}`], cwd: work });
  onCleanup('fake', () => fake.stop());
  await fake.waitForLog(/fake model listening/, 60_000);
  const keys = benchKeys();
  const cluster = await startCluster({ gateways: 1, workers: 1, fakePort, keys, work, name: 'sys', runtime: 'node' });
  const answer = fakeAnswer(TOKENS);
  const modes: Array<{ name: string; spec: RequestSpec; ok: (s: number | undefined, b: string) => boolean }> = [
    { name: 'non-streamed', spec: agentryRequest(cluster.port, keys, false), ok: (s, b) => s === 200 && b.includes(answer) },
    { name: `streamed (${TOKENS} tokens)`, spec: agentryRequest(cluster.port, keys, true), ok: (s, b) => s === 200 && b.includes('[DONE]') && b.includes(`tok${TOKENS - 1} `) },
  ];
  // Warm: JIT, pools at their size (the Postgres backends are found after this).
  for (const m of modes) await sendN(m.spec, 600, CONNECTIONS, m.ok);
  const pg = postgresPids(cluster.database).backends;
  const pids: Record<Kind, number[]> = { gateway: [cluster.gateways[0]!.pid], worker: [cluster.workers[0]!.pid], postgres: pg, redis: [cluster.redis.pid], fake: [fake.pid] };
  const results: Array<{ mode: string; cpu: Awaited<ReturnType<typeof cpuSplit>>; sys: Awaited<ReturnType<typeof syscallCounts>> }> = [];
  for (const m of modes) {
    const quiet = await waitForQuietBox(15, 30_000);
    const send = () => sendN(m.spec, RUNS, CONNECTIONS, m.ok);
    const cpu = await cpuSplit(pids, send);
    const sys = await syscallCounts(pids, send, work);
    results.push({ mode: m.name, cpu, sys });
    console.log(`${m.name}: box ${quiet.busy.toFixed(0)} % busy before; ${cpu.runs} runs timed, ${sys.runs} traced`);
    for (const k of KINDS) {
      const c = sys.calls[k];
      const total = [...c.values()].reduce((a, b) => a + b, 0) / sys.runs;
      console.log(`  ${k.padEnd(8)} user ${cpu.split[k].userMs.toFixed(2)} ms, kernel ${cpu.split[k].kernelMs.toFixed(2)} ms per run; ${total.toFixed(1)} syscalls per run: ${top(c, sys.runs, 6)}`);
    }
  }
  await cluster.stop();

  const rows: string[] = [];
  for (const r of results) {
    for (const k of KINDS) {
      const c = r.sys.calls[k];
      const total = [...c.values()].reduce((a, b) => a + b, 0) / r.sys.runs;
      const s = r.cpu.split[k];
      const share = s.userMs + s.kernelMs > 0 ? (100 * s.kernelMs) / (s.userMs + s.kernelMs) : 0;
      rows.push(`| ${r.mode} | ${k}${k === 'postgres' ? ` (${pids.postgres.length} backends)` : ''} | ${s.userMs.toFixed(2)} / ${s.kernelMs.toFixed(2)} (${share.toFixed(0)} %) | ${total.toFixed(1)} | ${top(c, r.sys.runs, 7)} |`);
    }
  }
  const section = [
    '<!-- bench:syscalls:start -->',
    '## Below the profile: kernel time and system calls per run (1 gateway + 1 worker)',
    '',
    `Run ${new Date(started).toISOString().replace(/\.\d+Z$/, 'Z')} with \`${commandLine('bench:syscalls')}\` (bench/syscalls.ts; ${Math.round((Date.now() - started) / 1000)} s). Machine: ${machineLine()}. Written by the script; re-running replaces it.`,
    '',
    `**Method.** A cluster of one gateway and one agent-worker, compiled, on a throwaway database of the local Postgres and a redis-server of its own, against the fake (bench/fake-model.ts, no delay, ${TOKENS} tokens); warmed with 600 runs of each kind. Per kind of run: ${RUNS} runs over ${CONNECTIONS} keep-alive connections with nothing attached, CPU from /proc/<pid>/stat split into user and kernel (system) time, divided by the runs; then ${RUNS} more with \`strace -c -f\` attached to every process of each kind (the Postgres backends of the cluster's database, found by their titles), system calls divided by the runs (strace slows every call, so that window is not timed). Kernel time is what the system calls cost: on loopback, a send also runs the receiving side's TCP stack and wakes its reader.`,
    '',
    '| run | process | CPU ms per run: user / kernel (kernel share) | system calls per run | most frequent, per run |',
    '|---|---|---:|---:|---|',
    ...rows,
    '<!-- bench:syscalls:end -->',
  ].join('\n');
  if (WRITE) writeDocSection('syscalls', section);
  else console.log(`\n${section}`);
}

function top(calls: Map<string, number>, runs: number, n: number): string {
  return [...calls.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, c]) => `${name} ${(c / runs).toFixed(1)}`)
    .join(', ');
}

runBench(main, 20 * 60_000);
