import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertNotFastTier } from './tiers.js';

/** The repository root, for spawning services by their source path. */
const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository's root, from src/ (tsx, vitest) or from dist/src/ (compiled: `npm run cluster`). */
export const repoRoot = path.resolve(here, here.endsWith(`${path.sep}dist${path.sep}src`) ? '../../../..' : '../../..');

export interface SpawnedService {
  proc: ChildProcess;
  /** Everything printed so far (stdout and stderr interleaved). */
  output(): string;
  /** Resolves with the first line matching, or rejects on exit or timeout. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code. */
  exited(): Promise<number | null>;
  /** Sends the signal and waits for exit. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
}

/**
 * Starts a service's main.ts from any working directory, with a controlled environment: the
 * sources under tsx with the source condition (`tsx`, the default: tests see the code as it is
 * now, built or not), or compiled through scripts/start.mjs as `npm run start:*` does
 * (`compiled`; build first with `node scripts/start.mjs --build-only <entry>` when several start
 * at once, else each would build).
 */
export function spawnService(
  entry: string,
  opts: { args?: string[]; env?: Record<string, string | undefined>; cwd?: string; onOutput?: (chunk: string) => void; runtime?: 'tsx' | 'compiled' } = {},
): SpawnedService {
  assertNotFastTier(`spawnService(${entry})`);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ PATH: process.env.PATH, HOME: process.env.HOME, ...opts.env })) if (v !== undefined) env[k] = v;
  const start =
    opts.runtime === 'compiled'
      ? [path.join(repoRoot, 'scripts/start.mjs'), entry]
      : ['--conditions=@agentry/source', '--import', import.meta.resolve('tsx'), path.resolve(repoRoot, entry)];
  const proc = spawn(process.execPath, [...start, ...(opts.args ?? [])], {
    cwd: opts.cwd ?? repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString();
    opts.onOutput?.(chunk.toString());
    for (const w of waiters) w();
  };
  proc.stdout!.on('data', onData);
  proc.stderr!.on('data', onData);
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let exitedFlag = false;
  void exit.then(() => {
    exitedFlag = true;
    for (const w of waiters) w();
  });

  return {
    proc,
    output: () => out,
    exited: () => exit,
    waitForLine(pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const line = out.split('\n').find((l) => pattern.test(l));
          if (line !== undefined) return finish(() => resolve(line));
          if (exitedFlag) return finish(() => reject(new Error(`process exited before ${pattern}:\n${out}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for ${pattern}:\n${out}`))), timeoutMs);
        const finish = (fn: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          fn();
        };
        waiters.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (!exitedFlag) proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
  };
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Polls until fn resolves truthy or the timeout passes; returns the value. */
export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      lastErr = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${lastErr ? `: ${(lastErr as Error).message}` : ''}`);
}
