import { AppError } from '@agentry/errors';

/** The bounds of one run (`worker.max_*`, read when the run starts). */
export interface RunBounds {
  /** Nested rule-chain tools, `flow` nodes and sub-agents together (`worker.max_call_depth`). */
  maxCallDepth: number;
  /** Wall time of the whole run (`worker.max_run_ms`). */
  maxRunMs: number;
  /** Model calls of the whole run (`worker.max_model_calls_per_run`). */
  maxModelCalls: number;
  /** Tool calls of the whole run (`worker.max_tool_calls_per_run`). */
  maxToolCalls: number;
  /** Ceiling of a tool's `timeout` (`worker.max_tool_timeout_ms`). */
  maxToolTimeoutMs: number;
}

/** The longest setTimeout Node honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * What one run may still spend, shared by every agent and chain nested in it. Passing a bound
 * aborts the run's signal with a human error (so every nested call ends with it) and throws it
 * where the bound was passed.
 */
export class RunLimits {
  /** The run's signal: the caller's (cancel, shutdown) or a passed bound. */
  readonly signal: AbortSignal;
  readonly #stop = new AbortController();
  readonly #timer: NodeJS.Timeout;
  #models = 0;
  #tools = 0;

  constructor(
    readonly bounds: RunBounds,
    outer: AbortSignal,
  ) {
    this.signal = AbortSignal.any([outer, this.#stop.signal]);
    this.#timer = setTimeout(() => this.#abort(`the run took longer than ${bounds.maxRunMs} ms (worker.max_run_ms) and was stopped`), Math.min(bounds.maxRunMs, MAX_TIMER_MS));
    this.#timer.unref();
  }

  /** The error that stopped the run, when a bound did (not a cancel). */
  get exceeded(): AppError | undefined {
    return this.#stop.signal.aborted ? (this.#stop.signal.reason as AppError) : undefined;
  }

  /** Counts a model call; past the bound the run ends. None starts once the run was stopped (a cancel reaches nested calls a microtask later). */
  modelCall(): void {
    if (this.exceeded) throw this.exceeded;
    if (++this.#models > this.bounds.maxModelCalls) this.#fail(`the run made more than ${this.bounds.maxModelCalls} model calls (worker.max_model_calls_per_run) and was stopped`);
  }

  /** Counts a tool call; past the bound the run ends. */
  toolCall(): void {
    if (this.exceeded) throw this.exceeded;
    if (++this.#tools > this.bounds.maxToolCalls) this.#fail(`the run made more than ${this.bounds.maxToolCalls} tool calls (worker.max_tool_calls_per_run) and was stopped`);
  }

  /**
   * The call path after entering `id` (a chain or agent: they share one id space) from `path`:
   * refused when `id` is already on it (a cycle) or the path would pass the depth bound.
   */
  enter(path: readonly string[], id: string): string[] {
    const next = [...path, id];
    if (path.includes(id)) throw new AppError('VALIDATION', 400, `"${id}" is already running in this run (${next.join(' -> ')}); chains and agents may not call themselves`);
    // The run's own agent is level 0.
    if (next.length - 1 > this.bounds.maxCallDepth) {
      this.#fail(`chains and agents nest at most ${this.bounds.maxCallDepth} deep (worker.max_call_depth): ${next.join(' -> ')}`);
    }
    return next;
  }

  /** A tool's per-call timeout under the ceiling. */
  toolTimeout(timeoutMs: number): number {
    return Math.min(timeoutMs, this.bounds.maxToolTimeoutMs);
  }

  close(): void {
    clearTimeout(this.#timer);
  }

  #abort(message: string): AppError {
    const err = new AppError('VALIDATION', 400, message);
    if (!this.#stop.signal.aborted) this.#stop.abort(err);
    return this.exceeded ?? err;
  }

  #fail(message: string): never {
    throw this.#abort(message);
  }
}
