import type { KeepOptions, NameOf, PayloadMap, PubSub, Unsubscribe } from '../ports.js';
import { encodeJson, safeCall } from '../shared.js';
import type { RedisContext } from './context.js';

type Handler = (message: unknown) => void;

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

  constructor(private readonly ctx: RedisContext) {
    ctx.subscriber.on('message', (channel: string, text: string) => this.deliver(channel, text));
  }

  async publish<C extends NameOf<M>>(channel: C, message: M[C], keep?: KeepOptions): Promise<void> {
    const payload = encodeJson(message, 'message');
    const conn = this.ctx.producer;
    if (!keep) {
      await this.ctx.command(conn, () => conn.publish(this.ctx.channel(channel), payload));
      return;
    }
    const maxLen = Math.max(1, Math.floor(keep.maxLen));
    const ttlMs = Math.max(1, Math.round(keep.ttlMs));
    await this.ctx.command(conn, () => conn.agentryPublishKept(this.#logKey(keep.log), this.ctx.channel(channel), payload, maxLen, ttlMs));
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
