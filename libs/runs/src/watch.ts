import { PubSubChannels, type RunChannel, type RunEvent } from '@agentry/contracts';
import { getRun, isFinalRunStatus, type Db, type RunRecord } from '@agentry/db';

/** The pub/sub side of runtime's `Bus` as this needs it. */
interface RunEventSource {
  subscribe(channel: RunChannel, handler: (message: RunEvent) => void): Promise<() => Promise<void>>;
}

interface RunWatchOptions {
  /** Give up after this long (the outcome is then `timeout`). */
  timeoutMs: number;
  /** Read the run row this often, should the end event be lost (default 2 s). */
  pollMs?: number;
  /** Stop waiting early (the outcome is then `aborted`). */
  signal?: AbortSignal;
}

export type RunWatchResult =
  | { kind: 'ended'; run: RunRecord }
  | { kind: 'gone' }
  | { kind: 'timeout' }
  | { kind: 'aborted' };

export interface RunWatch {
  /** Resolves once the run has ended (its row as committed), vanished, timed out or was aborted. */
  outcome(opts: RunWatchOptions): Promise<RunWatchResult>;
  /** Drops the subscription (outcome() does too when it resolves). Idempotent. */
  close(): Promise<void>;
}

/**
 * Watches a run for its end without relying on pub/sub alone: subscribe before the run's job is
 * enqueued (so that its `done`/`error` event cannot be missed), and the run row is read on every
 * end event and every `pollMs`, so a lost message delays the outcome by one poll at most. The
 * row is the truth: an event only says when to look (without pub/sub, polling alone works).
 */
export async function watchRun(deps: { db: Db; pubsub: RunEventSource }, runId: string): Promise<RunWatch> {
  let wake: (() => void) | undefined;
  let signalled = false;
  let unsubscribe: () => Promise<void>;
  try {
    unsubscribe = await deps.pubsub.subscribe(PubSubChannels.run(runId), ({ type }) => {
      if (type === 'done' || type === 'error') {
        signalled = true;
        wake?.();
      }
    });
  } catch {
    // Pub/sub unavailable: polling alone still finds the outcome, one poll later at most.
    unsubscribe = async () => undefined;
  }
  let closed: Promise<void> | undefined;
  const close = () => (closed ??= unsubscribe().catch(() => undefined));

  return {
    close,
    async outcome(opts) {
      const deadline = Date.now() + opts.timeoutMs;
      const pollMs = opts.pollMs ?? 2_000;
      try {
        for (;;) {
          signalled = false;
          const run = await getRun(deps.db, runId);
          if (!run) return { kind: 'gone' };
          if (isFinalRunStatus(run.status)) return { kind: 'ended', run };
          if (opts.signal?.aborted) return { kind: 'aborted' };
          const left = deadline - Date.now();
          if (left <= 0) return { kind: 'timeout' };
          if (signalled) continue;
          await new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              opts.signal?.removeEventListener('abort', done);
              wake = undefined;
              resolve();
            };
            const timer = setTimeout(done, Math.min(pollMs, left));
            opts.signal?.addEventListener('abort', done);
            wake = done;
          });
        }
      } finally {
        await close();
      }
    },
  };
}
