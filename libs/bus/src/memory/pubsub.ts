import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import type { KeepOptions, NameOf, PayloadMap, PubSub, Unsubscribe } from '../ports.js';
import { encodeJson, safeCall } from '../shared.js';

type Handler = (message: unknown) => void;
interface Subscription {
  handler: Handler;
}

/**
 * In-process pub/sub for embedded mode. Delivery is asynchronous and every handler gets its own
 * decoded copy, as with Redis, so code that works here does not break in cluster mode.
 */
export class MemoryPubSub<M extends PayloadMap> implements PubSub<M> {
  private readonly channels = new Map<string, Set<Subscription>>();
  /** One FIFO for all channels keeps per-channel order without a queue per channel. */
  private readonly outbox: Array<{ channel: string; payload: string; targets: Subscription[] }> = [];
  private draining = false;
  private closed = false;
  /** Kept logs: their payloads (JSON text, decoded per read as Redis does) and when each expires. */
  private readonly logs = new Map<string, { items: string[]; expiresAt: number }>();

  constructor(private readonly logger: Logger) {}

  async publish<C extends NameOf<M>>(channel: C, message: M[C], keep?: KeepOptions): Promise<void> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    const payload = encodeJson(message, 'message');
    if (keep) this.#keep(keep, payload);
    // Like Redis: a message reaches the subscribers present when it is published, not later ones.
    const targets = [...(this.channels.get(channel) ?? [])];
    if (targets.length === 0) return;
    this.outbox.push({ channel, payload, targets });
    if (!this.draining) {
      this.draining = true;
      setImmediate(() => this.drain());
    }
  }

  async subscribe<C extends NameOf<M>>(channel: C, handler: (message: M[C]) => void): Promise<Unsubscribe> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    // The decoded message is what a publisher typed by the same map sent: the bus trusts it as JSON only.
    const sub: Subscription = { handler: handler as Handler };
    let subs = this.channels.get(channel);
    if (!subs) {
      subs = new Set();
      this.channels.set(channel, subs);
    }
    subs.add(sub);
    return async () => {
      const current = this.channels.get(channel);
      if (!current) return;
      current.delete(sub);
      if (current.size === 0) this.channels.delete(channel);
    };
  }

  async kept(log: string): Promise<unknown[]> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    const entry = this.logs.get(log);
    if (!entry || entry.expiresAt <= Date.now()) return [];
    return entry.items.map((text) => JSON.parse(text) as unknown);
  }

  async clearKept(log: string): Promise<void> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    this.logs.delete(log);
  }

  #sweptAt = 0;

  #keep(keep: KeepOptions, payload: string): void {
    const now = Date.now();
    let entry = this.logs.get(keep.log);
    if (!entry || entry.expiresAt <= now) {
      entry = { items: [], expiresAt: 0 };
      this.logs.set(keep.log, entry);
      // Expired logs are dropped now and then as new ones start, so the map holds about the live ones.
      if (this.logs.size > 1024 && now - this.#sweptAt > 1000) {
        this.#sweptAt = now;
        for (const [k, e] of this.logs) if (e.expiresAt <= now && e !== entry) this.logs.delete(k);
      }
    }
    entry.items.push(payload);
    const maxLen = Math.max(1, Math.floor(keep.maxLen));
    if (entry.items.length > maxLen) entry.items.splice(0, entry.items.length - maxLen);
    entry.expiresAt = now + Math.max(1, Math.round(keep.ttlMs));
  }

  async listeners(channels: readonly NameOf<M>[]): Promise<number[]> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    return channels.map((c) => this.channels.get(c)?.size ?? 0);
  }

  close(): void {
    this.closed = true;
    this.channels.clear();
    this.outbox.length = 0;
    this.logs.clear();
  }

  private drain(): void {
    this.draining = false;
    const batch = this.outbox.splice(0);
    for (const { channel, payload, targets } of batch) {
      const live = this.channels.get(channel);
      for (const sub of targets) {
        if (!live?.has(sub)) continue;
        safeCall(
          () => sub.handler(JSON.parse(payload) as unknown),
          (err) => this.logger.error({ err, channel }, 'pub/sub handler threw'),
        );
      }
    }
  }
}
