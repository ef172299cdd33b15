/**
 * A container engine for the image test (image.test.ts): podman or docker, whichever works here.
 * A CLI alone proves nothing (this machine's `docker` is a client without an engine), so the
 * engine is the first whose `info` succeeds.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type OpenAI from 'openai';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export type EngineName = 'podman' | 'docker';

export interface Engine {
  name: EngineName;
  /** Runs the engine's CLI to completion; throws with its output on a non-zero exit. */
  run(args: string[], opts?: { timeoutMs?: number; env?: Record<string, string> }): string;
}

/** The working engine, or why there is none. `AGENTRY_CONTAINER_ENGINE` picks one. */
export function detectEngine(): Engine | { reason: string } {
  const wanted = process.env.AGENTRY_CONTAINER_ENGINE;
  const candidates: EngineName[] = wanted === 'docker' || wanted === 'podman' ? [wanted] : ['podman', 'docker'];
  const reasons: string[] = [];
  for (const name of candidates) {
    const info = spawnSync(name, ['info'], { encoding: 'utf8', timeout: 30_000 });
    if (info.status === 0) return engine(name);
    reasons.push(`${name}: ${info.error ? info.error.message : (info.stderr || info.stdout).trim().split('\n').at(-1)}`);
  }
  return { reason: `no working container engine (${reasons.join('; ')}); install podman with ../shared/tools/containers/setup.sh (as root)` };
}

function engine(name: EngineName): Engine {
  return {
    name,
    run(args, opts = {}) {
      const out = spawnSync(name, args, {
        encoding: 'utf8',
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, ...opts.env },
        cwd: repoRoot,
      });
      if (out.status !== 0) throw new Error(`${name} ${args.join(' ')} failed (${out.error?.message ?? `exit ${out.status}`}):\n${out.stdout}\n${out.stderr}`);
      return out.stdout;
    },
  };
}

/**
 * Builds deploy/Dockerfile. Base images come from the machine (podman: `--pull=never`, the
 * stand-ins that setup.sh builds), the build's npm from the host network.
 */
export function buildImage(e: Engine, tag: string): { seconds: number; sizeBytes: number } {
  const started = Date.now();
  const pull = e.name === 'podman' ? ['--pull=never'] : [];
  e.run(['build', '--network=host', ...pull, '-f', 'deploy/Dockerfile', '-t', tag, '.'], { timeoutMs: 15 * 60_000 });
  const seconds = (Date.now() - started) / 1000;
  const sizeBytes = Number(e.run(['image', 'inspect', '--format', '{{.Size}}', tag]).trim());
  return { seconds, sizeBytes };
}

export interface Container {
  name: string;
  proc: ChildProcess;
  startedAt: number;
  output(): string;
  /** The exit code of `<engine> run`, which is the container's. */
  exited(): Promise<number | null>;
  /** Sends a signal to the container's PID 1 (tini, which passes it on). */
  signal(sig: 'TERM' | 'KILL'): void;
}

export interface RunOptions {
  name: string;
  image: string;
  /** After the image name: the entry point's arguments. */
  args: string[];
  /**
   * Environment of the container. Passed as `-e NAME` with the value in the CLI's own
   * environment, so that no secret appears on a command line (`ps`) or in an error message.
   */
  env: Record<string, string>;
  /** Engine flags: network, user, read-only, mounts, capabilities. */
  flags: string[];
}

let seq = 0;
/** Starts a container in the foreground of a child process (`run --rm`), collecting its output. */
export function runContainer(e: Engine, opts: RunOptions): Container {
  const name = `${opts.name}-${process.pid}-${++seq}`;
  const envFlags = Object.keys(opts.env).flatMap((k) => ['-e', k]);
  const proc = spawn(e.name, ['run', '--rm', '--name', name, ...opts.flags, ...envFlags, opts.image, ...opts.args], {
    env: { ...process.env, ...opts.env },
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const onData = (chunk: Buffer) => {
    out += chunk.toString();
  };
  proc.stdout!.on('data', onData);
  proc.stderr!.on('data', onData);
  // 'close', not 'exit': the output is complete by then (stopContainer reads its last lines).
  const exit = new Promise<number | null>((resolve) => proc.once('close', (code) => resolve(code)));
  return {
    name,
    proc,
    startedAt: Date.now(),
    output: () => out,
    exited: () => exit,
    signal(sig) {
      spawnSync(e.name, ['kill', '--signal', sig, name], { timeout: 30_000 });
    },
  };
}

/** Removes containers left by a failed test (best effort: `run --rm` removes the others). */
export function forceRemove(e: Engine, containers: Container[]): void {
  for (const c of containers) if (c.proc.exitCode === null) spawnSync(e.name, ['rm', '-f', '-t', '0', c.name], { timeout: 30_000 });
}

/** Polls `url` until it answers 2xx; resolves with the milliseconds since `since`. */
export async function waitForHttp(url: string, since: number, timeoutMs: number, requestTimeoutMs = 3_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(requestTimeoutMs) });
      await res.arrayBuffer();
      if (res.ok) return Date.now() - since;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer 2xx within ${timeoutMs} ms (last: ${last})`);
}

/**
 * SIGTERM, then the exit: the code, how long it took, and the service's own `shutdown complete`
 * line (`clean`, `ms`).
 */
export async function stopContainer(c: Container, graceMs: number): Promise<{ code: number | null; wallMs: number; clean?: boolean; ms?: number }> {
  const started = Date.now();
  c.signal('TERM');
  const timer = setTimeout(() => c.signal('KILL'), graceMs + 10_000);
  const code = await c.exited();
  clearTimeout(timer);
  const wallMs = Date.now() - started;
  const line = c
    .output()
    .split('\n')
    .find((l) => l.includes('"msg":"shutdown complete"'));
  if (!line) return { code, wallMs };
  const parsed = JSON.parse(line) as { clean: boolean; ms: number };
  return { code, wallMs, clean: parsed.clean, ms: parsed.ms };
}

/**
 * How to run compose files with this engine: `docker compose`, or podman-compose (Debian's 1.0
 * needs e2e/podman-host-net.sh as its podman for `network_mode: host`), or why neither works.
 */
export function detectCompose(e: Engine): { argv: string[] } | { reason: string } {
  if (e.name === 'docker') {
    if (spawnSync('docker', ['compose', 'version'], { timeout: 30_000 }).status === 0) return { argv: ['docker', 'compose'] };
    // Debian's docker-compose 1.29 (Compose v2 is not packaged there).
    if (spawnSync('docker-compose', ['version'], { timeout: 30_000 }).status === 0) return { argv: ['docker-compose'] };
    return { reason: 'neither `docker compose` (the plugin) nor docker-compose is installed' };
  }
  const v = spawnSync('podman-compose', ['version'], { encoding: 'utf8', timeout: 30_000 });
  if (v.status !== 0) return { reason: 'podman-compose is not installed (apt-get install podman-compose)' };
  return { argv: ['podman-compose', '--podman-path', path.join(repoRoot, 'e2e/podman-host-net.sh')] };
}

/**
 * One chat streamed through the openai SDK: the text of its deltas and its finish_reason. The SDK
 * ends quietly on a body that stops early: the finish_reason tells a whole stream.
 */
export async function streamedChat(client: OpenAI, model: string, content: string): Promise<{ text: string; finish: string | null | undefined }> {
  const stream = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content }] });
  let text = '';
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish ??= chunk.choices[0]?.finish_reason;
  }
  return { text, finish };
}
