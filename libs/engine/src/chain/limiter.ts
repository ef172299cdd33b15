/**
 * Bounds concurrent work per key within this process, e.g. restApiCall's
 * `maxParallelRequestsCount` (RuleGo's MaxConnsPerHost of the node's own HTTP client: calls of
 * one node to one host beyond the limit wait for a free slot). Runs parse their chain afresh, so
 * a node's identity is its key (chain, node, host), not an object; an idle key is forgotten.
 */
class Slots {
  active = 0;
  readonly waiting: Array<() => void> = [];
  constructor(readonly limit: number) {}
}

export class KeyedLimiter {
  readonly #slots = new Map<string, Slots>();

  /** Slots in use for `key` (0 when idle): for tests and diagnostics. */
  active(key: string): number {
    return this.#slots.get(key)?.active ?? 0;
  }

  /**
   * Waits for one of `limit` slots of `key`; resolves with the function that frees it. Rejects
   * when `signal` aborts or `timeoutMs` passes first. A new limit (a reloaded chain) starts a
   * new set of slots; calls holding old ones finish on those.
   */
  async acquire(key: string, limit: number, signal: AbortSignal, timeoutMs: number): Promise<() => void> {
    let slots = this.#slots.get(key);
    if (!slots || slots.limit !== limit) {
      slots = new Slots(limit);
      this.#slots.set(key, slots);
    }
    if (slots.active < slots.limit) {
      slots.active++;
      return this.#release(key, slots);
    }
    await waitTurn(slots, signal, timeoutMs);
    return this.#release(key, slots);
  }

  #release(key: string, slots: Slots): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = slots.waiting.shift();
      // The slot passes straight to the next waiter: `active` stays as it is.
      if (next) return next();
      slots.active--;
      if (slots.active === 0 && this.#slots.get(key) === slots) this.#slots.delete(key);
    };
  }
}

function waitTurn(slots: Slots, signal: AbortSignal, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const turn = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    const leave = (err: Error) => {
      const at = slots.waiting.indexOf(turn);
      if (at >= 0) slots.waiting.splice(at, 1);
      signal.removeEventListener('abort', onAbort);
      clearTimeout(timer);
      reject(err);
    };
    const onAbort = () => leave(new Error('cancelled while waiting for a free request slot'));
    const timer = setTimeout(() => leave(new Error(`timed out after ${timeoutMs} ms waiting for one of ${slots.limit} parallel requests to finish`)), timeoutMs);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    slots.waiting.push(turn);
  });
}
