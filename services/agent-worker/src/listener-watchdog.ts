import type { Logger } from 'pino';
import type { ReplyChannel, RunChannel } from '@agentry/contracts';
import type { Bus } from '@agentry/bus';

/**
 * Checks in a row that find nobody listening on a chat run's channel before it is cancelled. More
 * than one, so that a gateway re-subscribing after a Redis blip (ioredis reconnects within 2 s)
 * does not lose its run; a failed check resets the count and never cancels.
 */
const LISTENER_MISSES = 3;
/**
 * Over Redis, how long a chat run about to start must find nobody listening before it is taken
 * for orphaned: longer than a gateway's subscriber needs to come back after a Redis blip (ioredis
 * retries every 2 s at most), which is when queued jobs are handed out again. In-process, a
 * subscription cannot blink, and one look is the truth.
 */
const START_GRACE_MS = 3_000;

/** A running chat run whose client's gateway is checked for. */
interface Watched {
  /** Where its gateway listens: that process's reply channel (or, for older rows, `run:<id>`). */
  channel: RunChannel | ReplyChannel;
  ctl: AbortController;
  misses: number;
  /** When the first of the current run of misses was seen. */
  missingSince: number;
}

/**
 * Whether a gateway still listens for a chat run: a chat's client is gone when nobody listens on
 * the run's channel, its gateway process's reply channel (the gateway died or restarted, so no
 * cancel can come; a client that leaves a live gateway is cancelled by that gateway's `run-cancel`). Runs in hand are
 * checked every `reliability.listener_check_ms` (0: off) and aborted after LISTENER_MISSES
 * checks in a row found nobody, and nobody for `reliability.resume_grace_ms` at least (its
 * client may resume on another gateway, which then listens on this channel); a run about to
 * start is asked about once (`clientWaiting`).
 */
export class ListenerWatchdog {
  readonly #watched = new Map<string, Watched>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly bus: Pick<Bus, 'pubsub' | 'kind'>,
    private readonly logger: Logger,
    private readonly checkMs: () => number,
    /** How long a streamed chat may have nobody listening (its client resuming on another gateway) before it is cancelled. */
    private readonly graceMs: () => number = () => 0,
  ) {}

  start(): void {
    if (this.#stopped) return;
    const everyMs = this.checkMs();
    // 0: off, but looked at again each second, should the configuration change.
    this.#timer = setTimeout(() => void (everyMs > 0 ? this.#check() : Promise.resolve()).finally(() => this.start()), everyMs || 1000);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** Aborts `ctl` once nobody listens on `channel` (the run's) any more. */
  watch(runId: string, channel: RunChannel | ReplyChannel, ctl: AbortController): void {
    this.#watched.set(runId, { channel, ctl, misses: 0, missingSince: 0 });
  }

  /** The client has its answer (or the run ended): nothing to watch. */
  unwatch(runId: string): void {
    this.#watched.delete(runId);
  }

  /**
   * Whether a gateway still waits for this chat run before it starts. A run queued across a
   * restart comes back through the sweep or a surviving job, and an answer now would only be
   * committed into the session under the user's retry. False only after LISTENER_MISSES checks
   * in a row (and, over Redis, START_GRACE_MS) found nobody; a check that fails, or checks
   * switched off, count as someone waiting. `first`: the first check's answer, asked already (`probe`).
   */
  async clientWaiting(channel: RunChannel | ReplyChannel, signal: AbortSignal, first?: Promise<number | undefined>): Promise<boolean> {
    const graceUntil = Date.now() + (this.bus.kind === 'redis' ? START_GRACE_MS : 0);
    for (let misses = 0; ; ) {
      const everyMs = this.checkMs();
      if (everyMs <= 0 || signal.aborted) return true;
      const count = misses === 0 && first ? await first : await this.probe(channel);
      if (count === undefined || count > 0) return true;
      misses += 1;
      if (misses >= LISTENER_MISSES && Date.now() >= graceUntil) return false;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }

  /**
   * One look at how many listen on `channel` (undefined: checks are off, or the broker did not
   * answer), for `clientWaiting`'s first check. Asked for before the run is claimed, it leaves in
   * the same Redis write as the run's lease (the producer pipelines a tick's commands); never rejects.
   */
  async probe(channel: RunChannel | ReplyChannel): Promise<number | undefined> {
    if (this.checkMs() <= 0) return undefined;
    try {
      const [count = 0] = await this.bus.pubsub.listeners([channel]);
      return count;
    } catch {
      return undefined;
    }
  }

  async #check(): Promise<void> {
    const entries = [...this.#watched];
    if (entries.length === 0) return;
    let counts: number[];
    try {
      // Runs of one gateway share its channel: ask about each channel once.
      const channels = [...new Set(entries.map(([, w]) => w.channel))];
      const found = await this.bus.pubsub.listeners(channels);
      const byChannel = new Map(channels.map((c, i) => [c, found[i] ?? 0]));
      counts = entries.map(([, w]) => byChannel.get(w.channel) ?? 0);
    } catch (err) {
      // Unknown is not "nobody": start counting again once the broker answers.
      for (const [, w] of entries) w.misses = 0;
      this.logger.debug({ err: (err as Error).message }, 'listener check failed');
      return;
    }
    entries.forEach(([runId, w], i) => {
      if ((counts[i] ?? 0) > 0) {
        w.misses = 0;
        return;
      }
      if (w.misses === 0) w.missingSince = Date.now();
      w.misses += 1;
      // A client whose gateway died may resume on another one within the grace: that one then listens here.
      if (w.misses >= LISTENER_MISSES && Date.now() - w.missingSince >= this.graceMs() && !w.ctl.signal.aborted) {
        this.logger.info({ runId, checks: w.misses }, 'no gateway listens for this chat run any more (its client is gone); cancelling it');
        w.ctl.abort(new Error('nobody is waiting for this run any more'));
      }
    });
  }
}
