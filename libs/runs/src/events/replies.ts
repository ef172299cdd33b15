import { randomUUID } from 'node:crypto';
import { PubSubChannels, type ReplyChannel, type RunChannel, type RunEvent } from '@agentry/contracts';

/** The pub/sub side of runtime's `Bus` as this needs it. */
interface ReplySource {
  subscribe(channel: ReplyChannel, handler: (message: RunEvent) => void): Promise<() => Promise<void>>;
}

/** Where a run's events are published: its waiting gateway's reply channel, else `run:<id>`. */
export function runEventChannel(run: { id: string; replyTo: string | null }): RunChannel | ReplyChannel {
  return run.replyTo ? PubSubChannels.replies(run.replyTo) : PubSubChannels.run(run.id);
}

const byPubSub = new WeakMap<object, GatewayReplies>();

/**
 * The gateway process's end of its reply channel: one subscription to `replies:<id>` for the
 * process's life, its messages handed to the run they name (`runId`), instead of a SUBSCRIBE and
 * an UNSUBSCRIBE (two Redis round trips, and a pub/sub bookkeeping change on the server) per
 * chat. The run row's `reply_to` is `id`, so the worker publishes there, and a gateway that dies
 * leaves nobody subscribed: the worker's listener check cancels its runs. Order and loss are
 * still checked per run by `RunEventQueue` (seq), as on `run:<id>`: one channel keeps the order
 * of each publisher's messages, and a message lost across a reconnect is a gap.
 */
export class GatewayReplies {
  /** This process's reply channel id (what the run row's `reply_to` holds). */
  readonly id = randomUUID().replace(/-/g, '');
  readonly #handlers = new Map<string, (event: RunEvent) => void>();
  #subscribed: Promise<unknown> | undefined;

  private constructor(private readonly pubsub: ReplySource) {}

  /** The one instance per pub/sub port (per process; a test's bus gets its own). */
  static of(pubsub: ReplySource): GatewayReplies {
    let replies = byPubSub.get(pubsub);
    if (!replies) {
      replies = new GatewayReplies(pubsub);
      byPubSub.set(pubsub, replies);
    }
    return replies;
  }

  /** Runs listened for right now. */
  get size(): number {
    return this.#handlers.size;
  }

  /**
   * Hands the events of `runId` to `handler` from now on. Resolves, with the function that stops
   * it, once the process's subscription is active (a publish after that is not missed); rejects
   * when it cannot be made (the next call tries again).
   */
  async listen(runId: string, handler: (event: RunEvent) => void): Promise<() => void> {
    this.#handlers.set(runId, handler);
    try {
      await this.#subscription();
    } catch (err) {
      this.#handlers.delete(runId);
      throw err;
    }
    return () => {
      if (this.#handlers.get(runId) === handler) this.#handlers.delete(runId);
    };
  }

  #subscription(): Promise<unknown> {
    if (!this.#subscribed) {
      const p = this.pubsub.subscribe(PubSubChannels.replies(this.id), (event) => this.#handlers.get(event.runId)?.(event));
      this.#subscribed = p;
      // A failed SUBSCRIBE (Redis away) is not remembered: the next chat tries again.
      p.catch(() => {
        if (this.#subscribed === p) this.#subscribed = undefined;
      });
    }
    return this.#subscribed;
  }
}
