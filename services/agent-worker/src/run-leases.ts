import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { RunKeeps } from '@agentry/contracts';
import type { Bus, LeaseKeeper } from '@agentry/bus';

/**
 * The liveness leases of the runs in hand in this process (`reliability.run_lease_ms`): one
 * key per run, renewed every third of the lease by one timer for the whole process (the renewals
 * of all runs leave in one write: the producer auto-pipelines), so a run costs no command per
 * token. A gateway relaying the run reads the key (`RunLeaseWatch`): when it lapses the worker is
 * taken for dead, within seconds rather than BullMQ's stall timeout. The lease is also the guard
 * against running a run twice: a job whose run another live worker holds leaves it alone, and a
 * worker that finds its run's lease taken by another (it was taken for dead) aborts its copy.
 * On Redis the renewals run in a thread of their own (`Bus.keepLeases`): a main thread busy
 * for seconds is not taken for dead; one stuck past `worker.stall_timeout_ms` is.
 */
export class RunLeases {
  /** This process as a lease holder. */
  readonly owner = `worker:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly #held = new Map<string, AbortController>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /**
   * The renewal thread, made once leases are on (`run_lease_ms` > 0, seen by the timer or a
   * take): none while they are off, nor on the memory bus, which has no `keepLeases`.
   */
  #keeper: LeaseKeeper | undefined;

  constructor(
    private readonly bus: Pick<Bus, 'lease' | 'keepLeases'>,
    private readonly logger: Logger,
    /** `reliability.run_lease_ms`, read at each renewal (0: off). */
    private readonly leaseMs: () => number,
    /** How long the main thread may be busy before its leases are let go (BullMQ's stall time). */
    private readonly maxStallMs = 30_000,
  ) {}

  /** The keeper, started now if need be (never after stop). */
  #keeperNow(): LeaseKeeper | undefined {
    if (!this.#keeper && !this.#stopped) this.#keeper = this.bus.keepLeases?.({ owner: this.owner, maxStallMs: this.maxStallMs });
    return this.#keeper;
  }

  start(): void {
    if (this.#stopped) return;
    const ms = this.leaseMs();
    // Leases on: the thread is started ahead of the first run (warm when a busy main thread needs it).
    if (ms > 0) this.#keeperNow();
    // Off: looked at again each second, should the configuration change.
    this.#timer = setTimeout(() => void this.#renew(ms).finally(() => this.start()), ms > 0 ? Math.max(50, Math.floor(ms / 3)) : 1000);
    this.#timer.unref();
  }

  /** Stops renewing: leases still held lapse by themselves. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#keeper?.close();
  }

  /**
   * Takes the run's lease for this process, `ctl` being aborted should another worker take it
   * over. False only when another worker holds it (it is running the run now); leases off or a
   * backend that cannot answer count as taken (BullMQ's own lock still guards the job).
   */
  async take(runId: string, ctl: AbortController): Promise<boolean> {
    // A second job for a run already in hand here (a hand-off after a lapse this process lived through) leaves it alone.
    if (this.#held.has(runId)) return false;
    const ms = this.leaseMs();
    if (ms <= 0) return true;
    let taken = true;
    try {
      taken = await this.bus.lease(RunKeeps.lease(runId), this.owner, ms);
    } catch (err) {
      this.logger.debug({ err: (err as Error).message, runId }, 'could not take the run lease; running without it');
    }
    if (taken) {
      this.#held.set(runId, ctl);
      this.#keeperNow()?.hold(RunKeeps.lease(runId), ms, () => this.#lost(runId, ctl));
    }
    return taken;
  }

  /**
   * The job ended here: the lease is given up at once (renewed for 1 ms), since a job put back
   * at shutdown must be taken by the next worker now, not after the lease. A gateway still
   * relaying the run reads its row before it takes a missing lease for a death.
   */
  drop(runId: string, ctl: AbortController): void {
    if (this.#held.get(runId) !== ctl) return;
    this.#held.delete(runId);
    if (this.leaseMs() <= 0) return;
    if (this.#keeper) return this.#keeper.release(RunKeeps.lease(runId));
    this.bus.lease(RunKeeps.lease(runId), this.owner, 1).catch((err: unknown) => {
      this.logger.debug({ err: (err as Error).message, runId }, 'could not give up the run lease; it lapses by itself');
    });
  }

  async #renew(ms: number): Promise<void> {
    // The keeper's thread renews once it is up; this timer covers its start and a bus without one.
    if (ms <= 0 || this.#held.size === 0 || this.#keeper?.ready) return;
    await Promise.all(
      [...this.#held].map(async ([runId, ctl]) => {
        try {
          if (await this.bus.lease(RunKeeps.lease(runId), this.owner, ms)) return;
        } catch (err) {
          // Unknown is not lost: Redis away. The run goes on; the next renewal takes the key again if it lapsed meanwhile.
          this.logger.debug({ err: (err as Error).message, runId }, 'run lease renewal failed');
          return;
        }
        this.#lost(runId, ctl);
      }),
    );
  }

  #lost(runId: string, ctl: AbortController): void {
    if (this.#held.get(runId) !== ctl) return;
    this.#held.delete(runId);
    this.logger.warn({ runId }, 'another worker took this run over (this one was taken for dead: its lease lapsed); aborting this copy');
    ctl.abort(new Error('another worker took this run over'));
  }
}
