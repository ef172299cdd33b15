import type { KeepOptions, NameOf, PayloadMap, PubSub, Unsubscribe } from '../ports.js';
import { encodeJson, safeCall } from '../shared.js';
import type { RedisContext } from './context.js';

type Handler = (message: unknown) => void;

/** Starts a batch frame and separates its messages: JSON text never holds this byte unescaped. */
const FRAME = '\x1e';
/** Messages one batch carries at most: its script runs alone on the server, which must stay short. */
const BATCH_MAX = 256;

interface Queued {
  payload: string;
  keep: KeepOptions | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** A channel's publishes: whether one is in flight, and those that came meanwhile. */
interface Outbox {
  busy: boolean;
  queued: Queued[];
}

interface ChannelEntry {
  handlers: Set<Handler>;
  /** The SUBSCRIBE for this channel; every subscriber waits for Redis to confirm it. */
  confirmed: Promise<void>;
}

/**
 * One subscriber connection for the whole bus, whatever the number of subscriptions: a channel
 * is SUBSCRIBEd when its first handler arrives and UNSUBSCRIBEd when its last one leaves.
 */
export class RedisPubSub<M extends PayloadMap> implements PubSub<M> {
  private readonly channels = new Map<string, ChannelEntry>();
  /** Channels with a publish in flight (see `publish`). */
  private readonly outboxes = new Map<string, Outbox>();

  constructor(
    private readonly ctx: RedisContext,
    /** False: every message its own PUBLISH, as subscribers of releases before the frames read them (`RedisBusOptions.batchFrames`). */
    private readonly batchFrames = true,
  ) {
    ctx.subscriber.on('message', (channel: string, text: string) => this.deliver(channel, text));
  }

  /**
   * Publishes go out per channel without a timer: one that finds its channel idle is sent at
   * once, and those that come while it is in flight wait for it and then leave together, as one
   * frame in one script call (subscribers unpack it: `deliver`). Under load (a worker relaying
   * hundreds of paced streams to one gateway's reply channel) that is one command, one write and
   * one message per round trip instead of one per token; one at a time, nothing changes.
   */
  publish<C extends NameOf<M>>(channel: C, message: M[C], keep?: KeepOptions): Promise<void> {
    let payload: string;
    try {
      payload = encodeJson(message, 'message');
    } catch (err) {
      return Promise.reject(err);
    }
    const full = this.ctx.channel(channel);
    // One connection keeps the order of the commands sent on it: no outbox needed.
    if (!this.batchFrames) return this.#one(full, payload, keep);
    let found = this.outboxes.get(full);
    if (!found) {
      found = { busy: false, queued: [] };
      this.outboxes.set(full, found);
    }
    const box = found;
    return new Promise<void>((resolve, reject) => {
      box.queued.push({ payload, keep, resolve, reject });
      if (!box.busy) this.#send(full, box);
    });
  }

  /** Sends what the channel has queued (in order, at most BATCH_MAX), then again while more came. */
  #send(full: string, box: Outbox): void {
    const batch = box.queued.splice(0, BATCH_MAX);
    if (batch.length === 0) {
      box.busy = false;
      // Idle channels are forgotten: a process publishes on many run channels over its life.
      this.outboxes.delete(full);
      return;
    }
    box.busy = true;
    const sent = batch.length === 1 ? this.#one(full, batch[0]!.payload, batch[0]!.keep) : this.#many(full, batch);
    sent.then(
      () => {
        for (const q of batch) q.resolve();
        this.#send(full, box);
      },
      (err: unknown) => {
        for (const q of batch) q.reject(err);
        this.#send(full, box);
      },
    );
  }

  /** One message as it always went: PUBLISH, or the kept publish's script. */
  async #one(full: string, payload: string, keep: KeepOptions | undefined): Promise<void> {
    const conn = this.ctx.producer;
    if (!keep) {
      await this.ctx.command(conn, () => conn.publish(full, payload));
      return;
    }
    const maxLen = Math.max(1, Math.floor(keep.maxLen));
    const ttlMs = Math.max(1, Math.round(keep.ttlMs));
    await this.ctx.command(conn, () => conn.agentryPublishKept(this.#logKey(keep.log), full, payload, maxLen, ttlMs));
  }

  /** Several messages as one frame, their logs appended in the same script. */
  async #many(full: string, batch: Queued[]): Promise<void> {
    const keys: string[] = [];
    const index = new Map<string, number>();
    const args: Array<string | number> = [full];
    for (const q of batch) {
      let k = 0;
      if (q.keep) {
        const key = this.#logKey(q.keep.log);
        k = index.get(key) ?? 0;
        if (k === 0) {
          k = keys.push(key);
          index.set(key, k);
        }
      }
      const maxLen = q.keep ? Math.max(1, Math.floor(q.keep.maxLen)) : 0;
      const ttlMs = q.keep ? Math.max(1, Math.round(q.keep.ttlMs)) : 0;
      args.push(k, maxLen, ttlMs, q.payload);
    }
    const conn = this.ctx.producer;
    await this.ctx.command(conn, () => conn.agentryPublishBatch(keys.length, ...keys, ...args));
  }

  async kept(log: string): Promise<unknown[]> {
    const conn = this.ctx.producer;
    const items = await this.ctx.command(conn, () => conn.lrange(this.#logKey(log), 0, -1));
    return items.map((text) => JSON.parse(text) as unknown);
  }

  async clearKept(log: string): Promise<void> {
    const conn = this.ctx.producer;
    await this.ctx.command(conn, () => conn.del(this.#logKey(log)));
  }

  #logKey(log: string): string {
    return `${this.ctx.prefix}:kept:${log}`;
  }

  async listeners(channels: readonly NameOf<M>[]): Promise<number[]> {
    if (channels.length === 0) return [];
    const full = channels.map((c) => this.ctx.channel(c));
    // The reply alternates channel and count, in the order asked.
    const reply = (await this.ctx.command(this.ctx.producer, () => this.ctx.producer.call('PUBSUB', 'NUMSUB', ...full))) as Array<string | number>;
    return full.map((_, i) => Number(reply[i * 2 + 1] ?? 0));
  }

  async subscribe<C extends NameOf<M>>(channel: C, handler: (message: M[C]) => void): Promise<Unsubscribe> {
    const full = this.ctx.channel(channel);
    let entry = this.channels.get(full);
    if (!entry) {
      const confirmed = this.ctx.command(this.ctx.subscriber, async () => {
        await this.ctx.subscriber.subscribe(full);
      });
      entry = { handlers: new Set(), confirmed };
      this.channels.set(full, entry);
    }
    // A Set would merge the same function subscribed twice; the wrapper keeps them apart. The
    // decoded message is what a publisher typed by the same map sent: the bus trusts it as JSON only.
    const own: Handler = (message) => handler(message as M[C]);
    entry.handlers.add(own);
    try {
      await entry.confirmed;
    } catch (err) {
      this.drop(full, entry, own);
      throw err;
    }
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      if (this.drop(full, entry, own)) {
        // Commands on one connection run in order, so a SUBSCRIBE issued after this one by a new
        // first handler still wins.
        await this.ctx.subscriber.unsubscribe(full).catch((err: unknown) => {
          this.ctx.logger.warn({ err, channel }, 'unsubscribe failed; messages of the channel are ignored');
        });
      }
    };
  }

  /** Forgets the handler; true when it was the channel's last one. */
  private drop(full: string, entry: ChannelEntry, handler: Handler): boolean {
    entry.handlers.delete(handler);
    if (entry.handlers.size > 0 || this.channels.get(full) !== entry) return false;
    this.channels.delete(full);
    return true;
  }

  private deliver(channel: string, text: string): void {
    const entry = this.channels.get(channel);
    if (!entry) return;
    if (text.startsWith(FRAME)) {
      for (const one of text.slice(1).split(FRAME)) this.deliverOne(channel, entry, one);
    } else this.deliverOne(channel, entry, text);
  }

  private deliverOne(channel: string, entry: ChannelEntry, text: string): void {
    for (const handler of [...entry.handlers]) {
      safeCall(
        // Decoded per handler so that no handler sees another's mutations.
        () => handler(JSON.parse(text) as unknown),
        (err) => this.ctx.logger.error({ err, channel, runId: runIdOf(text) }, 'pub/sub handler threw'),
      );
    }
  }
}

/** The run a message is about, for the log line of a handler that threw on it (run events and cancels name one). */
function runIdOf(text: string): string | undefined {
  try {
    const runId = (JSON.parse(text) as { runId?: unknown } | null)?.runId;
    return typeof runId === 'string' ? runId : undefined;
  } catch {
    return undefined;
  }
}
