import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { AppError, Errors } from '@agentry/errors';
import {
  WORKER_SOURCE,
  type SandboxErrorKind,
  type SandboxJob,
  type SandboxReply,
  type SandboxWorkerData,
  type SandboxWorkerMessage,
} from './worker-source.js';

/**
 * Runs user JavaScript (the `jsFilter`, `jsTransform`, `jsSwitch` and `log` scripts of rule
 * chains) in QuickJS (quickjs-emscripten) inside a pool of worker threads.
 *
 * Every evaluation gets a fresh QuickJS runtime and context: no state survives between calls,
 * and the script sees only plain JavaScript (no `process`, `require`, `fetch`, timers or I/O).
 * Limits: the deadline (QuickJS interrupt handler), the memory limit (QuickJS's own accounting
 * plus a cap on the worker's WebAssembly memory, which is what stops string bombs), the stack
 * size, and a hard backstop: when a worker has not answered `graceMs` after the deadline (one
 * big operation can overshoot the interrupt by seconds), the parent terminates it and starts a
 * new one.
 */

export interface SandboxOptions {
  /** Worker threads, each running one evaluation at a time. Default 2. */
  workers?: number;
  /** Deadline of one evaluation in ms (the default for `run`). Default 1000. */
  timeoutMs?: number;
  /** Memory one evaluation may use. Default 32 MiB. */
  memoryBytes?: number;
  /** QuickJS stack size. Default 256 KiB (deep recursion fails as `stack overflow`). */
  stackBytes?: number;
  /** How long after the deadline the parent terminates an unresponsive worker. Default 250 ms. */
  graceMs?: number;
  /** Evaluations waiting for a worker before `run` refuses more. Default 1000. */
  maxQueue?: number;
}

/**
 * What a script sees: `msg` (the message data, parsed when it is JSON), `metadata`, `msgType`
 * and RuleGo's fourth parameter `dataType` (`JSON` or `TEXT`; undefined when not given).
 */
export interface ScriptInput {
  msg: unknown;
  metadata: Record<string, string>;
  msgType: string;
  dataType?: string;
}

export interface RunScriptOptions {
  /** Overrides the sandbox's deadline for this evaluation. */
  timeoutMs?: number;
  /** Aborting rejects at once (a running evaluation's worker is terminated and replaced). */
  signal?: AbortSignal;
  /**
   * Whose evaluation this is (the agent). A free worker goes to the waiting evaluation whose key
   * has the fewest running, so one agent's looping chats cannot queue every other agent behind them.
   */
  key?: string;
}

/** `result` (also thrown by nodes): the script ran but returned what its node cannot use. */
export type ScriptErrorKind = SandboxErrorKind | 'crashed' | 'aborted' | 'closed' | 'busy';

/**
 * Why a script failed. `message` is meant for the chain author (it names the line when known).
 * A registered error, so that a run failing on it answers its status instead of a 500: 422 for
 * a script broken whatever its input, 502 for one that failed as it ran.
 */
export class ScriptError extends AppError {
  readonly kind: ScriptErrorKind;
  /** 1-based line of the user's code, when QuickJS reported one. */
  readonly line: number | undefined;
  constructor(kind: ScriptErrorKind, message: string, line?: number) {
    const cls = kind === 'syntax' || kind === 'result' ? Errors.SCRIPT_INVALID : Errors.SCRIPT_FAILED;
    super(cls.code, cls.status, message);
    this.name = 'ScriptError';
    this.kind = kind;
    this.line = line;
  }
}

export interface SandboxStats {
  workers: number;
  busy: number;
  queued: number;
  evaluations: number;
  /** Workers replaced: after a backstop terminate, an abort, a crash, or when their memory reached its cap. */
  restarts: number;
}

const MIB = 1024 * 1024;
/**
 * WebAssembly memory a worker has beyond the evaluation's limit (QuickJS itself, its stack).
 * This cap is the limit that holds: QuickJS's own accounting misses strings and undercounts
 * objects in this build (no malloc_usable_size), so a bomb usually meets the cap first.
 */
const WASM_BASE_BYTES = 16 * MIB;
const WASM_PAGE = 64 * 1024;

interface Job {
  id: number;
  code: string;
  input: string;
  timeoutMs: number;
  key: string;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker | undefined;
  ready: boolean;
  job: Job | undefined;
  timer: NodeJS.Timeout | undefined;
}

let quickjsPath: string | undefined;
function resolveQuickjs(): string {
  quickjsPath ??= createRequire(import.meta.url).resolve('quickjs-emscripten');
  return quickjsPath;
}

export class ScriptSandbox {
  readonly timeoutMs: number;
  readonly memoryBytes: number;
  readonly stackBytes: number;
  readonly graceMs: number;
  readonly maxQueue: number;
  readonly #slots: Slot[];
  readonly #queue: Job[] = [];
  readonly #readyWaiters: Array<() => void> = [];
  readonly #workerData: SandboxWorkerData;
  #nextId = 1;
  /** Per key, the serial of its last evaluation started: ties between keys go to the one served longest ago. */
  readonly #lastServed = new Map<string, number>();
  #served = 0;
  #closed = false;
  #evaluations = 0;
  #restarts = 0;

  constructor(opts: SandboxOptions = {}) {
    const workers = Math.max(1, Math.floor(opts.workers ?? 2));
    this.timeoutMs = opts.timeoutMs ?? 1000;
    this.memoryBytes = opts.memoryBytes ?? 32 * MIB;
    this.stackBytes = opts.stackBytes ?? 256 * 1024;
    this.graceMs = opts.graceMs ?? 250;
    this.maxQueue = opts.maxQueue ?? 1000;
    this.#slots = Array.from({ length: workers }, () => ({ worker: undefined, ready: false, job: undefined, timer: undefined }));
    this.#workerData = {
      quickjsPath: resolveQuickjs(),
      wasmPages: Math.ceil((this.memoryBytes + WASM_BASE_BYTES) / WASM_PAGE),
    };
  }

  /**
   * Runs `code`, a function body (`return msg.temperature > 50;`) called as
   * `function (msg, metadata, msgType, dataType)`, and resolves with what it returns, passed through JSON
   * (`undefined` when it returns nothing). Rejects with a ScriptError.
   */
  run(code: string, input: ScriptInput, opts: RunScriptOptions = {}): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ScriptError('closed', 'the script sandbox is closed'));
    if (opts.signal?.aborted) return Promise.reject(new ScriptError('aborted', 'the script was cancelled'));
    if (this.#queue.length >= this.maxQueue) {
      return Promise.reject(new ScriptError('busy', `the script sandbox has ${this.#queue.length} evaluations waiting; try again later`));
    }
    let inputJson: string;
    try {
      inputJson = JSON.stringify(input);
    } catch (err) {
      return Promise.reject(new ScriptError('runtime', `the script input is not JSON: ${(err as Error).message}`));
    }
    return new Promise<unknown>((resolve, reject) => {
      const job: Job = {
        id: this.#nextId++,
        code,
        input: inputJson,
        timeoutMs: opts.timeoutMs ?? this.timeoutMs,
        key: opts.key ?? '',
        signal: opts.signal,
        onAbort: undefined,
        resolve,
        reject,
      };
      if (job.signal) {
        job.onAbort = () => this.#abort(job);
        job.signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#queue.push(job);
      this.#dispatch();
    });
  }

  /** Terminates every worker; waiting and running evaluations reject with kind `closed`. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const resolve of this.#readyWaiters.splice(0)) resolve();
    for (const job of this.#queue.splice(0)) this.#settle(job, new ScriptError('closed', 'the script sandbox was closed'));
    await Promise.all(
      this.#slots.map(async (slot) => {
        if (slot.job) this.#settle(slot.job, new ScriptError('closed', 'the script sandbox was closed'));
        slot.job = undefined;
        if (slot.timer) clearTimeout(slot.timer);
        const worker = slot.worker;
        slot.worker = undefined;
        if (worker) await worker.terminate();
      }),
    );
  }

  /** Starts every worker now instead of at the first evaluation; resolves when all are ready. */
  async warmUp(): Promise<void> {
    if (this.#closed) return;
    for (const slot of this.#slots) if (!slot.worker) this.#spawn(slot);
    if (this.#slots.every((s) => s.ready)) return;
    await new Promise<void>((resolve) => this.#readyWaiters.push(resolve));
  }

  #notifyReady(): void {
    if (!this.#slots.every((s) => s.ready)) return;
    for (const resolve of this.#readyWaiters.splice(0)) resolve();
  }

  stats(): SandboxStats {
    return {
      workers: this.#slots.filter((s) => s.worker).length,
      busy: this.#slots.filter((s) => s.job).length,
      queued: this.#queue.length,
      evaluations: this.#evaluations,
      restarts: this.#restarts,
    };
  }

  #dispatch(): void {
    if (this.#closed) return;
    for (const slot of this.#slots) {
      if (this.#queue.length === 0) return;
      if (slot.job) continue;
      if (!slot.worker) {
        this.#spawn(slot);
        continue;
      }
      if (!slot.ready) continue;
      this.#start(slot, this.#next());
    }
  }

  /**
   * Takes the oldest waiting job of the key with the fewest evaluations running; among equals,
   * of the key served longest ago (round robin, so a key with a long queue takes turns).
   */
  #next(): Job {
    const running = new Map<string, number>();
    for (const slot of this.#slots) if (slot.job) running.set(slot.job.key, (running.get(slot.job.key) ?? 0) + 1);
    let best = 0;
    let bestRank: [number, number] = [Infinity, Infinity];
    const seen = new Set<string>();
    for (let i = 0; i < this.#queue.length; i++) {
      const key = this.#queue[i]!.key;
      if (seen.has(key)) continue;
      seen.add(key);
      const rank: [number, number] = [running.get(key) ?? 0, this.#lastServed.get(key) ?? -1];
      if (rank[0] < bestRank[0] || (rank[0] === bestRank[0] && rank[1] < bestRank[1])) {
        best = i;
        bestRank = rank;
      }
    }
    const job = this.#queue.splice(best, 1)[0] as Job;
    this.#lastServed.set(job.key, this.#served++);
    if (this.#lastServed.size > 10_000) this.#forgetIdleKeys();
    return job;
  }

  /** Keeps the served-order map to the keys still waiting (it only ranks those). */
  #forgetIdleKeys(): void {
    const waiting = new Set(this.#queue.map((j) => j.key));
    for (const key of this.#lastServed.keys()) if (!waiting.has(key)) this.#lastServed.delete(key);
  }

  #start(slot: Slot, job: Job): void {
    const worker = slot.worker as Worker;
    slot.job = job;
    worker.ref();
    const message: SandboxJob = {
      id: job.id,
      code: job.code,
      input: job.input,
      timeoutMs: job.timeoutMs,
      memoryBytes: this.memoryBytes,
      stackBytes: this.stackBytes,
    };
    worker.postMessage(message);
    slot.timer = setTimeout(() => {
      if (slot.job !== job) return;
      this.#replace(slot, new ScriptError('timeout', `script timed out after ${job.timeoutMs} ms (stopped by force)`));
    }, job.timeoutMs + this.graceMs);
  }

  #spawn(slot: Slot): void {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: this.#workerData,
      // The worker's own JavaScript heap stays small; QuickJS lives in WebAssembly memory.
      resourceLimits: { maxOldGenerationSizeMb: 64 + Math.ceil((2 * this.memoryBytes) / MIB), stackSizeMb: 4 },
    });
    worker.unref();
    slot.worker = worker;
    slot.ready = false;
    worker.on('message', (m: SandboxWorkerMessage) => {
      if (slot.worker !== worker) return;
      if (m.type === 'ready') {
        slot.ready = true;
        this.#notifyReady();
        this.#dispatch();
      } else if (m.type === 'result') {
        this.#finish(slot, m);
      } else {
        this.#replace(slot, new ScriptError('crashed', `the script sandbox failed: ${m.message}`));
      }
    });
    worker.on('error', (err) => {
      if (slot.worker !== worker) return;
      this.#replace(slot, new ScriptError('crashed', `the script sandbox failed: ${err.message}`));
    });
    worker.on('exit', () => {
      if (slot.worker !== worker) return;
      this.#replace(slot, new ScriptError('crashed', 'the script sandbox worker stopped unexpectedly'));
    });
  }

  #finish(slot: Slot, reply: SandboxReply): void {
    const job = slot.job;
    if (!job || job.id !== reply.id) return;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
    slot.worker?.unref();
    this.#evaluations++;
    if (reply.ok) {
      let value: unknown;
      try {
        value = reply.json === undefined ? undefined : JSON.parse(reply.json);
      } catch (err) {
        this.#settle(job, new ScriptError('result', `the script result is not JSON: ${(err as Error).message}`));
        this.#dispatch();
        return;
      }
      this.#settle(job, undefined, value);
    } else {
      this.#settle(job, this.#errorOf(reply, job));
      // WebAssembly memory never shrinks: a worker that used all of it starts afresh.
      if (reply.recycle) this.#replace(slot);
    }
    this.#dispatch();
  }

  #errorOf(reply: Extract<SandboxReply, { ok: false }>, job: Job): ScriptError {
    if (reply.kind === 'timeout') return new ScriptError('timeout', `script timed out after ${job.timeoutMs} ms`, reply.line);
    if (reply.kind === 'memory') {
      return new ScriptError('memory', `script ran out of memory (limit ${Math.round(this.memoryBytes / MIB)} MiB)`, reply.line);
    }
    const where = reply.line !== undefined ? ` (line ${reply.line})` : '';
    if (reply.kind === 'result') return new ScriptError('result', `${reply.message}${where}`, reply.line);
    return new ScriptError(reply.kind, `${reply.name}: ${reply.message}${where}`, reply.line);
  }

  /**
   * Terminates the slot's worker, fails its job (if any) with `err` and starts a replacement at
   * once, so the next evaluation does not wait for a worker to start. A worker that failed
   * before it was ever ready is not replaced (that would loop): the evaluations waiting fail
   * with its error, and the next `run` tries again.
   */
  #replace(slot: Slot, err?: ScriptError): void {
    const worker = slot.worker;
    const job = slot.job;
    const wasReady = slot.ready;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
    slot.worker = undefined;
    slot.ready = false;
    if (worker) {
      this.#restarts++;
      void worker.terminate();
    }
    if (job && err) this.#settle(job, err);
    if (this.#closed) return;
    if (!wasReady) {
      const cause = err ?? new ScriptError('crashed', 'the script sandbox worker did not start');
      for (const waiting of this.#queue.splice(0)) this.#settle(waiting, new ScriptError('crashed', cause.message));
      for (const resolve of this.#readyWaiters.splice(0)) resolve();
      return;
    }
    this.#spawn(slot);
  }

  #abort(job: Job): void {
    const queued = this.#queue.indexOf(job);
    if (queued >= 0) {
      this.#queue.splice(queued, 1);
      this.#settle(job, new ScriptError('aborted', 'the script was cancelled'));
      return;
    }
    const slot = this.#slots.find((s) => s.job === job);
    if (slot) this.#replace(slot, new ScriptError('aborted', 'the script was cancelled'));
  }

  #settle(job: Job, err: Error | undefined, value?: unknown): void {
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
    if (err) job.reject(err);
    else job.resolve(value);
  }
}
