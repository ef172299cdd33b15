/**
 * Issue 39, "a fresh clone": how long a first `npm start` takes to answer `/health` and `/ready`,
 * and the peak memory of its processes, measured on fresh clones of given commits, alternating.
 *
 *   npx tsx bench/first-start.ts --commits=<base>,<head> [--rounds=3] [--restart]
 *
 * One sample: `git clone --shared` of the commit into a new directory, `node_modules` hard-linked
 * from this checkout (what `npm install` leaves, without the network), then `npm start` there
 * (as a newcomer types it; an older commit's `prestart` with it) with a new HOME, polled every 100 ms. Phases are
 * read from the launcher's own lines (web UI, transpile) and the server's log file (timestamps).
 * Memory: every process under `npm start` is sampled every 50 ms: the server's own VmHWM (the
 * process running bin/start.mjs), the highest VmHWM of any of them (a child's, read while it
 * lives) and the highest sum of the RSS of those alive at once (sampled: a lower bound). With --restart the same clone is started a second time
 * (the start a user makes every day), once what the first start left running in the background
 * (the bundle's child) has finished. Times move 2-3x with the box's load; counts and memory hold.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const COMMITS = (flag('commits') ?? 'HEAD').split(',').filter(Boolean);
const ROUNDS = Number(flag('rounds') ?? 1);
const RESTART = argv.includes('--restart');
const TIMEOUT_MS = 240_000;
/** Clock ticks per second of /proc's CPU times (getconf CLK_TCK; 100 on Linux). */
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

interface Sample {
  commit: string;
  start: 'first' | 'restart';
  healthS: number;
  readyS: number;
  serverMb: number;
  /** CPU (user + system) of the server process when `/health` first answered. */
  serverCpuS: number;
  peakMb: number;
  sumMb: number;
  phases: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Pids of every process below `root` (from /proc's parent links). */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = Number(/^PPid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${d}/status`, 'utf8'))![1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

function statusKb(pid: number, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat, after the command's parentheses), NaN when unknown. */
function cpuSeconds(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** The process `npm start` runs the server in (the launcher imports the compiled standalone). */
function isServer(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('standalone/bin/start.mjs');
  } catch {
    return false;
  }
}

async function probe(url: string): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return r.ok;
  } catch {
    return false;
  }
}

async function startOnce(dir: string, home: string, commit: string, start: Sample['start']): Promise<Sample> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = spawn('npm', ['start'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, PORT: String(port), HOST: '127.0.0.1', NO_COLOR: '1', AGENTRY_LOG_LEVEL: 'debug' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  const lines: string[] = [];
  const note = (c: Buffer) => {
    const at = ((performance.now() - t0) / 1000).toFixed(1);
    for (const l of c.toString().split('\n')) if (l.trim()) lines.push(`${at}s ${l.trim()}`);
    out += c.toString();
  };
  proc.stdout.on('data', note);
  proc.stderr.on('data', note);
  const hwm = new Map<number, number>();
  let server = 0;
  let serverPid = 0;
  let sum = 0;
  const sampler = setInterval(() => {
    let s = 0;
    for (const pid of descendants(proc.pid!)) {
      const high = statusKb(pid, 'VmHWM');
      hwm.set(pid, Math.max(hwm.get(pid) ?? 0, high));
      if (isServer(pid)) {
        server = Math.max(server, high);
        serverPid = pid;
      }
      s += statusKb(pid, 'VmRSS');
    }
    sum = Math.max(sum, s);
  }, 50);
  let healthS = NaN;
  let serverCpuS = NaN;
  let readyS = NaN;
  try {
    while (performance.now() - t0 < TIMEOUT_MS) {
      if (Number.isNaN(healthS) && (await probe(`http://127.0.0.1:${port}/health`))) {
        healthS = (performance.now() - t0) / 1000;
        serverCpuS = cpuSeconds(serverPid);
      }
      if (!Number.isNaN(healthS) && (await probe(`http://127.0.0.1:${port}/ready`))) {
        readyS = (performance.now() - t0) / 1000;
        break;
      }
      if (proc.exitCode !== null) throw new Error(`npm start exited ${proc.exitCode}:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    clearInterval(sampler);
    process.kill(-proc.pid!, 'SIGTERM');
    await new Promise((r) => proc.once('exit', r));
  }
  const phases = lines.filter((l) => /web UI|transpil|initdb|PGlite|migrat|listening|starting/i.test(l)).map((l) => l.slice(0, 160));
  return { commit, start, healthS, readyS, serverCpuS, serverMb: server / 1024, peakMb: Math.max(0, ...hwm.values()) / 1024, sumMb: sum / 1024, phases: phases.join('\n    ') };
}

/** Waits (up to 2 minutes) until no process left behind by a start runs in `dir` any more. */
async function backgroundDone(dir: string): Promise<void> {
  const until = performance.now() + 120_000;
  const running = () =>
    fs.readdirSync('/proc').some((d) => {
      try {
        return /^\d+$/.test(d) && fs.readlinkSync(`/proc/${d}/cwd`) === dir && fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('--bundle-only');
      } catch {
        return false;
      }
    });
  while (running() && performance.now() < until) await new Promise((r) => setTimeout(r, 200));
}

function freshClone(commit: string): { dir: string; home: string } {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-first-start-'));
  const dir = path.join(base, 'agentry');
  execFileSync('git', ['clone', '-q', '--shared', '--no-checkout', ROOT, dir]);
  execFileSync('git', ['-C', dir, 'checkout', '-q', '--detach', commit]);
  // What `npm install` leaves: the packages (hard links: no copy, no network) and the workspace links.
  execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules')]);
  // Not what `npm install` leaves: this checkout's caches (Node's compile cache, since 2026-11-29).
  fs.rmSync(path.join(dir, 'node_modules/.cache'), { recursive: true, force: true });
  for (const nm of ['services/cli/node_modules']) {
    if (fs.existsSync(path.join(ROOT, nm))) execFileSync('cp', ['-al', path.join(ROOT, nm), path.join(dir, nm)]);
  }
  const home = path.join(base, 'home');
  fs.mkdirSync(home);
  return { dir: base, home };
}

const samples: Sample[] = [];
const resolved = COMMITS.map((c) => execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', c]).toString().trim());
for (let round = 0; round < ROUNDS; round++) {
  for (const commit of resolved) {
    const { dir: base, home } = freshClone(commit);
    try {
      const dir = path.join(base, 'agentry');
      for (const start of RESTART ? (['first', 'restart'] as const) : (['first'] as const)) {
        // The start a user makes the next day finds what the first one left running finished
        // (since 2026-11-29, the bundle a low-priority child makes after a first start).
        if (start === 'restart') await backgroundDone(dir);
        const s = await startOnce(dir, home, commit, start);
        samples.push(s);
        const load = os.loadavg()[0]!.toFixed(1);
        console.log(`${commit} ${start}: /health ${s.healthS.toFixed(1)} s, /ready ${s.readyS.toFixed(1)} s, server CPU to /health ${s.serverCpuS.toFixed(2)} s, server VmHWM ${s.serverMb.toFixed(0)} MB, highest VmHWM ${s.peakMb.toFixed(0)} MB, RSS sum ${s.sumMb.toFixed(0)} MB (load ${load})\n    ${s.phases}`);
      }
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
console.log('\nmedians | commit | start | /health s | /ready s | server CPU to /health s | server VmHWM MB | highest VmHWM of any process MB | highest RSS sum MB |');
for (const commit of resolved) {
  for (const start of ['first', 'restart'] as const) {
    const ss = samples.filter((s) => s.commit === commit && s.start === start);
    if (ss.length === 0) continue;
    console.log(`| ${commit} | ${start} | ${median(ss.map((s) => s.healthS)).toFixed(1)} | ${median(ss.map((s) => s.readyS)).toFixed(1)} | ${median(ss.map((s) => s.serverCpuS)).toFixed(2)} | ${median(ss.map((s) => s.serverMb)).toFixed(0)} | ${median(ss.map((s) => s.peakMb)).toFixed(0)} | ${median(ss.map((s) => s.sumMb)).toFixed(0)} |`);
  }
}
