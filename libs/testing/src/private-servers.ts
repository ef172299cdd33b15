import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe } from 'vitest';
import { freePort, waitFor } from './process.js';
import { skipLoudly } from './require-servers.js';
import { reachable } from './servers.js';
import { createMigratedDatabase, type TestDatabase } from './postgres.js';

/**
 * Redis and Postgres servers of one test file's own, for tests that stop and restart them (fault
 * injection): the shared servers other tests use are never disturbed. Both are real restarts on
 * the same port and data directory, with the persistence production uses (Redis AOF).
 */

const run = promisify(execFile);

/** Servers still up when this process exits (a test that never reached its afterAll) are stopped then. */
const atExit = new Set<() => void>();
process.once('exit', () => {
  for (const stop of atExit) stop();
});

/** The Postgres server binaries: on PATH, else Debian's /usr/lib/postgresql/<version>/bin. */
function postgresBinDir(): string | undefined {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  if (onPath) return path.dirname(onPath);
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return undefined;
  const versions = fs
    .readdirSync(root)
    .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], 'bin') : undefined;
}

function onPath(bin: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).stdout.trim() !== '';
}

/** Why private servers cannot start here (a missing binary), or undefined when they can. */
export function privateServersProblem(): string | undefined {
  const missing = [!onPath('redis-server') && 'redis-server', !postgresBinDir() && 'initdb/pg_ctl (the postgresql server package)'].filter(Boolean);
  return missing.length > 0 ? `not installed: ${missing.join(', ')}` : undefined;
}

/**
 * `describe` for suites that start private servers: without the binaries the suite is skipped
 * with a loud reason, except under CI=true, where it fails.
 */
export function describeWithPrivateServers(name: string, fn: () => void): void {
  const problem = privateServersProblem();
  if (problem) skipLoudly(name, problem, fn);
  else describe(name, fn);
}

export interface PrivateRedis {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** Stops the server (SIGTERM: it writes its AOF and exits) and waits for the exit. */
  stop(): Promise<void>;
  /**
   * Starts it again on the same port and directory; resolves once it accepts connections.
   * `empty`: with its data files removed first, as a Redis without persistence comes back.
   */
  start(opts?: { empty?: boolean }): Promise<void>;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
}

/** A redis-server of the caller's own on a free loopback port, AOF on (fsync always), no RDB. */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-redis-'));
  const port = await freePort();
  let proc: ChildProcess | undefined;
  let log = '';
  const start = async (opts: { empty?: boolean } = {}) => {
    if (opts.empty) {
      if (proc) throw new Error('private redis: stop it before starting it empty');
      for (const f of fs.readdirSync(dir)) fs.rmSync(path.join(dir, f), { recursive: true, force: true });
    }
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    proc = child;
    const kill = () => child.kill('SIGKILL');
    atExit.add(kill);
    child.once('exit', () => atExit.delete(kill));
    child.stdout!.on('data', (c: Buffer) => void (log += c.toString()));
    child.stderr!.on('data', (c: Buffer) => void (log += c.toString()));
    try {
      await waitFor(async () => child.exitCode === null && (await reachable(`tcp://127.0.0.1:${port}`, port)), 10_000, 25);
    } catch (err) {
      child.kill('SIGKILL');
      throw new Error(`private redis-server did not start: ${(err as Error).message}\n${log.slice(-2000)}`);
    }
  };
  const stop = async () => {
    const child = proc;
    proc = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop,
    start,
    close: async () => {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  /** A fast shutdown (open sessions are ended, nothing committed is lost); waits until it is down. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it accepts connections. */
  start(): Promise<void>;
  /** A new database on this server, migrated to the latest schema; `drop()` removes it. */
  createDatabase(name?: string): Promise<TestDatabase>;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

/**
 * A Postgres cluster of the caller's own (initdb, trust auth) on a free loopback port, its
 * socket inside its own directory. Postgres refuses to run as root: as root, the binaries run
 * as the `postgres` user (runuser) and the directory is given to it.
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('private Postgres: initdb not found (install the postgresql server package)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-pg-'));
  const data = path.join(dir, 'data');
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('private Postgres: running as root, and there is no `postgres` user to run the server as');
    fs.chownSync(dir, uid, gid);
  }
  const command = (tool: string, args: string[]): [string, string[]] => {
    const file = path.join(bin, tool);
    return asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
  };
  const exec = async (tool: string, args: string[]) => {
    const [cmd, argv] = command(tool, args);
    try {
      await run(cmd, argv, { timeout: 60_000 });
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string };
      const logFile = path.join(dir, 'server.log');
      const serverLog = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '';
      throw new Error(`private Postgres: ${tool} failed: ${e.message}\n${e.stderr ?? ''}${e.stdout ?? ''}\n${serverLog}`);
    }
  };
  // fsync off: a fast shutdown still writes everything; only a machine crash could lose data here.
  const options = `-p ${port} -h 127.0.0.1 -k ${dir} -c fsync=off -c max_connections=200`;
  const start = () => exec('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', '-o', options, 'start']);
  const stop = () => exec('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
  let running = false;
  const stopAtExit = () => {
    const [cmd, argv] = command('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
    spawnSync(cmd, argv, { stdio: 'ignore', timeout: 10_000 });
  };
  atExit.add(stopAtExit);
  try {
    await exec('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
    await start();
    running = true;
  } catch (err) {
    atExit.delete(stopAtExit);
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    stop: async () => {
      await stop();
      running = false;
    },
    start: async () => {
      await start();
      running = true;
    },
    createDatabase: (name = `agentry_${Math.random().toString(36).slice(2, 10)}`) =>
      createMigratedDatabase(url, name, { poolMax: 4, connectTimeoutMs: 2_000, serverGone: () => !running }),
    close: async () => {
      atExit.delete(stopAtExit);
      if (running) await stop().catch(() => undefined);
      running = false;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
