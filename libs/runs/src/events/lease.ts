import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { RunKeeps } from '@agentry/contracts';
import { markRunStreamed, type Db } from '@agentry/db';
import { enqueueRun } from '../submit.js';

/** What the client of a run whose worker died after it started answering is told (the take-over says the same). */
export const WORKER_LOST_MESSAGE = 'the worker running this request stopped after it had started answering; the partial answer is lost, please retry';

/** The lease side of runtime's `Bus` as this needs it. */
interface LeaseSource {
  leaseHolders(keys: readonly string[]): Promise<Array<string | null>>;
}

/** One relayed run's lease as its relay sees it. */
export interface WatchedLease {
  /** Resolves once the run's lease, seen held before, has been missing long enough to take its worker for dead. */
  lapsed(): Promise<void>;
  /** The run was handed to another worker: wait for that one's lease before a lapse counts again. */
  reset(): void;
  stop(): void;
}

interface Entry {
  key: string;
  /** The lease was seen held: only then can it lapse (a queued run has none yet). */
  seen: boolean;
  /** The first successful check that found it missing since it was last seen. */
  missingSince: number | undefined;
  lapse: { promise: Promise<void>; resolve: () => void; fired: boolean };
}

const watches = new WeakMap<object, RunLeaseWatch>();

/**
 * The gateway process's reader of the liveness leases of the runs it relays (the worker side is
 * agent-worker's `RunLeases`): one `MGET` of every watched run's key each sixth of
 * `reliability.run_lease_ms` (500 ms by default) for the whole process, whatever the number of
 * streams. A lease lapses for a relay when it was seen held, then found missing by successful
 * checks spanning a sixth of the lease, with no failed check (Redis away) within a whole lease
 * (a worker renews again within a third of one once Redis is back). With the defaults a worker
 * SIGKILLed is noticed 3-4 s after its last renewal.
 */
export class RunLeaseWatch {
  readonly #entries = new Map<string, Set<Entry>>();
  #timer: NodeJS.Timeout | undefined;
  #lastFailure = 0;

  private constructor(
    private readonly source: LeaseSource,
    private readonly leaseMs: () => number,
  ) {}

  /** The one watch per bus (per process; a test's bus gets its own). */
  static of(source: LeaseSource, leaseMs: () => number): RunLeaseWatch {
    let watch = watches.get(source);
    if (!watch) {
      watch = new RunLeaseWatch(source, leaseMs);
      watches.set(source, watch);
    }
    return watch;
  }

  /** Runs watched right now. */
  get size(): number {
    return this.#entries.size;
  }

  watch(runId: string): WatchedLease {
    const entry: Entry = { key: RunKeeps.lease(runId), seen: false, missingSince: undefined, lapse: armed() };
    let set = this.#entries.get(runId);
    if (!set) {
      set = new Set();
      this.#entries.set(runId, set);
    }
    set.add(entry);
    this.#schedule();
    return {
      lapsed: () => entry.lapse.promise,
      reset: () => {
        entry.seen = false;
        entry.missingSince = undefined;
        if (entry.lapse.fired) entry.lapse = armed();
      },
      stop: () => {
        const entries = this.#entries.get(runId);
        entries?.delete(entry);
        if (entries?.size === 0) this.#entries.delete(runId);
      },
    };
  }

  #schedule(): void {
    if (this.#timer || this.#entries.size === 0) return;
    const ms = this.leaseMs();
    this.#timer = setTimeout(() => {
      void this.#check(ms).finally(() => {
        this.#timer = undefined;
        this.#schedule();
      });
    }, ms > 0 ? Math.max(50, Math.floor(ms / 6)) : 1000);
    this.#timer.unref();
  }

  async #check(leaseMs: number): Promise<void> {
    if (leaseMs <= 0) return;
    const runs = [...this.#entries];
    if (runs.length === 0) return;
    let holders: Array<string | null>;
    try {
      holders = await this.source.leaseHolders(runs.map(([runId]) => RunKeeps.lease(runId)));
    } catch {
      // Unknown is not missing: every run starts counting again once Redis answers.
      this.#lastFailure = Date.now();
      for (const [, set] of runs) for (const e of set) e.missingSince = undefined;
      return;
    }
    const now = Date.now();
    runs.forEach(([, set], i) => {
      for (const e of set) {
        if (holders[i]) {
          e.seen = true;
          e.missingSince = undefined;
          continue;
        }
        if (!e.seen || e.lapse.fired) continue;
        e.missingSince ??= now;
        if (now - e.missingSince >= leaseMs / 6 && now - this.#lastFailure >= leaseMs) {
          e.lapse.fired = true;
          e.lapse.resolve();
        }
      }
    });
  }
}

function armed(): Entry['lapse'] {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve, fired: false };
}

/**
 * What a relay does when its run's worker died: a run that had streamed is marked so (the take-over
 * must fail it, not answer again, even if the dead worker's own mark never landed), and the run is
 * enqueued again under a job of its own (the dead worker's job stays claimed until BullMQ's stall
 * timeout): a live worker takes it over now, re-running it when nothing was streamed and failing it
 * cleanly otherwise. The lease keeps that from running it twice. Failures are logged: BullMQ's
 * stall detection and the sweep are still the backstop.
 */
export async function handOffRun(deps: { db: Db; queue: Parameters<typeof enqueueRun>[0]; logger: Logger }, runId: string, streamed: boolean): Promise<void> {
  deps.logger.warn({ runId, streamed }, "the worker running this run stopped renewing its lease (taken for dead); handing the run to another worker");
  if (streamed) {
    await markRunStreamed(deps.db, runId).catch((err: unknown) => deps.logger.warn({ err, runId }, 'could not mark the run streamed'));
  }
  await enqueueRun(deps.queue, runId, { jobId: `${runId}-handoff-${randomUUID().slice(0, 8)}` }).catch((err: unknown) =>
    deps.logger.warn({ err, runId }, 'could not enqueue the run for another worker; the stall timeout will'),
  );
}

/** A relay's lease option (`RunRelay`'s `lease`), stopped with `watch.stop()` when the relay is done. */
export interface RelayLease {
  runId: string;
  watch: WatchedLease;
  handOff: (streamed: boolean) => Promise<void>;
}

/**
 * The lease a gateway's relay of `runId` watches: only over Redis with `reliability.run_lease_ms`
 * above 0 (undefined otherwise). In embedded mode the worker runs in the gateway's process and
 * dies with it: there is nobody left to tell.
 */
export function relayLease(
  deps: { bus: LeaseSource & { kind: 'redis' | 'memory'; queue: Parameters<typeof enqueueRun>[0] }; db: Db; logger: Logger; leaseMs: () => number },
  runId: string,
): RelayLease | undefined {
  if (deps.bus.kind !== 'redis' || deps.leaseMs() <= 0) return undefined;
  return {
    runId,
    watch: RunLeaseWatch.of(deps.bus, deps.leaseMs).watch(runId),
    handOff: (streamed) => handOffRun({ db: deps.db, queue: deps.bus.queue, logger: deps.logger }, runId, streamed),
  };
}
